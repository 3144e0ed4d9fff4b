@testable import FanoutCore
import FanoutModel
import FanoutTestSupport
import Testing

@Suite("HeldDeliveries")
struct HeldDeliveriesTests {
    /// Random inserts and removals over a small id space (so buckets collide and runs wrap around
    /// the table), checked against `Set` after every step: results, count, membership of every id,
    /// and the iteration.
    @Test(arguments: [(1, 0), (2, 0xDEAD_BEEF), (3, .max)] as [(UInt64, UInt64)])
    func matchesSet(seed: UInt64, tableSeed: UInt64) {
        var random = SeededRandomNumberGenerator(seed: seed)
        var held = HeldDeliveries(seed: tableSeed)
        var model = Set<DeliveryID>()
        let space = (1...20).flatMap { sequence in (0..<UInt32(40)).map { DeliveryID(messageSequence: sequence, slot: $0) } }
        for step in 0..<30_000 {
            let id = space[Int.random(in: 0..<space.count, using: &random)]
            // Phases that mostly insert, then mostly remove, so the set grows and empties again.
            let insertShare = (step / 5000) % 2 == 0 ? 70 : 30
            if Int.random(in: 0..<100, using: &random) < insertShare {
                #expect(held.insert(id) == model.insert(id).inserted)
            } else {
                #expect(held.remove(id) == (model.remove(id) != nil))
            }
            #expect(held.count == model.count)
            if step % 250 == 0 {
                for probe in space { #expect(held.contains(probe) == model.contains(probe)) }
                #expect(Set(held) == model && Array(held).count == model.count)
            }
        }
    }
}
