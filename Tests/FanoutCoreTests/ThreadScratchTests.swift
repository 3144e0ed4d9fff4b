@testable import FanoutCore
import Foundation
import Testing

@Suite("Thread scratch")
struct ThreadScratchTests {
    @Test func aThreadReusesItsBlock() {
        let first = ThreadScratch.withBytes(100) { UInt(bitPattern: $0.baseAddress) }
        let second = ThreadScratch.withBytes(ThreadScratch.blockSize) { UInt(bitPattern: $0.baseAddress) }
        #expect(first != 0 && first == second)
        #expect(first % 16 == 0)
    }

    @Test func aNestedCallGetsMemoryOfItsOwn() {
        ThreadScratch.withBytes(64) { outer in
            outer.initializeMemory(as: UInt8.self, repeating: 0xAA)
            ThreadScratch.withBytes(64) { inner in
                #expect(inner.baseAddress != outer.baseAddress)
                inner.initializeMemory(as: UInt8.self, repeating: 0x55)
            }
            #expect(outer.allSatisfy { $0 == 0xAA })
        }
        // The block is lent again once the outer call is over.
        let again = ThreadScratch.withBytes(64) { UInt(bitPattern: $0.baseAddress) }
        let block = ThreadScratch.withBytes(64) { UInt(bitPattern: $0.baseAddress) }
        #expect(again == block)
    }

    @Test func aLargeRequestIsAllocated() {
        let block = ThreadScratch.withBytes(64) { UInt(bitPattern: $0.baseAddress) }
        ThreadScratch.withBytes(ThreadScratch.blockSize + 1) { memory in
            #expect(memory.count == ThreadScratch.blockSize + 1)
            #expect(UInt(bitPattern: memory.baseAddress) != block)
            memory.initializeMemory(as: UInt8.self, repeating: 1)
        }
    }

    @Test func threadsHaveBlocksOfTheirOwn() {
        // Two threads hold their blocks at the same time: each records its address, then waits
        // until both have.
        let addresses = Locked<[UInt]>([])
        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        for _ in 0..<2 {
            Thread {
                ThreadScratch.withBytes(64) { memory in
                    addresses.withLock { $0.append(UInt(bitPattern: memory.baseAddress)) }
                    entered.signal()
                    release.wait()
                }
                finished.signal()
            }.start()
        }
        entered.wait()
        entered.wait()
        let seen = addresses.withLock { $0 }
        release.signal()
        release.signal()
        finished.wait()
        finished.wait()
        #expect(seen.count == 2 && Set(seen).count == 2)
    }

    @Test func aDocumentParsedWhileAnotherIsReadKeepsBoth() throws {
        let outer = Array(#"{"a":["x","y"],"b":{"c":1}}"#.utf8)
        let inner = Array(#"[true,{"d":"e"}]"#.utf8)
        let values = try JSONParser.withDocument(outer) { document in
            (document.value(at: JSONDocument.root), try? JSONParser.withDocument(inner) { $0.value(at: JSONDocument.root) }, document.value(at: JSONDocument.root))
        }
        #expect(values.0 == (try JSONParser.parse(outer)))
        #expect(values.1 == (try JSONParser.parse(inner)))
        #expect(values.2 == values.0)
    }
}
