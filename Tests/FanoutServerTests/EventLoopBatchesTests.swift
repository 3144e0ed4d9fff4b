@testable import FanoutHTTP
import Foundation
import NIOCore
import NIOPosix
import Synchronization
import Testing

/// Work handed to event loops in batches (how durable sends go back to their connections): every
/// item runs, on its loop, in the order each thread submitted it.
@Suite struct EventLoopBatchesTests {
    @Test func everyItemRunsOnItsLoopInTheOrderItWasSubmitted() throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        defer { try? group.syncShutdownGracefully() }
        let loops = [group.next(), group.next()]
        let batches = EventLoopBatches()
        let seen = Mutex<[[Int]]>(Array(repeating: [], count: 4))
        let offLoop = Mutex(0)
        let done = DispatchGroup()
        for submitter in 0..<4 {
            done.enter()
            Thread.detachNewThread {
                let loop = loops[submitter % 2]
                for item in 0..<1000 {
                    batches.submit(to: loop) {
                        if !loop.inEventLoop { offLoop.withLock { $0 += 1 } }
                        seen.withLock { $0[submitter].append(item) }
                    }
                }
                done.leave()
            }
        }
        done.wait()
        // Everything submitted has run once a last item on each loop has.
        for loop in loops {
            let ran = DispatchSemaphore(value: 0)
            batches.submit(to: loop) { ran.signal() }
            ran.wait()
        }
        let runs = seen.withLock { $0 }
        #expect(runs.allSatisfy { $0 == Array(0..<1000) })
        #expect(offLoop.withLock { $0 } == 0)
    }
}
