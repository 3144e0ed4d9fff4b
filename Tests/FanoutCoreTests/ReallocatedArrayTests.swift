@testable import FanoutCore
import FanoutTestSupport
import Synchronization
import Testing

@Suite("ReallocatedArray")
struct ReallocatedArrayTests {
    /// How many `Tracked` of one test are alive (tests run side by side).
    final class Census: Sendable {
        let alive = Atomic<Int>(0)
    }

    /// Counted in its census while alive, so that a test sees every element released exactly once.
    final class Tracked: Sendable {
        let value: Int
        let census: Census

        init(_ value: Int, _ census: Census) {
            self.value = value
            self.census = census
            census.alive.add(1, ordering: .relaxed)
        }

        deinit { self.census.alive.subtract(1, ordering: .relaxed) }
    }

    /// Appends, writes in place and copies taken along the way, against `Array`: through every
    /// growth each element reads back, a copy keeps the elements it had when it was taken, and
    /// at the end every element (class references, moved by `realloc`) is released once.
    @Test(arguments: [5, 6] as [UInt64])
    func matchesArray(seed: UInt64) {
        var random = SeededRandomNumberGenerator(seed: seed)
        let census = Census()
        do {
            var array = ReallocatedArray<Tracked?>()
            var model: [Tracked?] = []
            var copies: [(copy: ReallocatedArray<Tracked?>, model: [Tracked?])] = []
            for step in 0..<20_000 {
                switch Int.random(in: 0..<10, using: &random) {
                case 0..<6:
                    let element = Bool.random(using: &random) ? Tracked(step, census) : nil
                    array.append(element)
                    model.append(element)
                case 6..<9 where !model.isEmpty:
                    let index = Int.random(in: 0..<model.count, using: &random)
                    array[index] = Tracked(-step, census)
                    model[index] = array[index]
                default:
                    copies.append((array, model))
                    if copies.count > 4 { copies.removeFirst() }
                }
                #expect(array.count == model.count)
            }
            #expect(array.elementsEqual(model, by: ===))
            for (copy, model) in copies {
                #expect(copy.elementsEqual(model, by: ===))
                #expect(copy.withUnsafeBufferPointer { $0.elementsEqual(model, by: ===) })
            }
        }
        #expect(census.alive.load(ordering: .relaxed) == 0)
    }

    @Test
    func repeatingFillsEveryElement() {
        let array = ReallocatedArray(repeating: 7 as UInt64, count: 100_000)
        #expect(array.count == 100_000)
        #expect(array.allSatisfy { $0 == 7 })
        #expect(ReallocatedArray(repeating: 1 as UInt8, count: 0).isEmpty)
    }
}
