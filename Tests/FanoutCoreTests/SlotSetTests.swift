@_spi(Storage) import FanoutCore
import FanoutTestSupport
import Testing

@Suite("SlotSet")
struct SlotSetTests {
    /// Random inserts and removes at several densities, checked against `Set<UInt32>` after each step,
    /// so that chunks cross the array/bitmap boundary in both directions.
    @Test(arguments: [(1, 70_000), (2, 9000), (3, 300_000), (4, 140_000)] as [(UInt64, UInt32)])
    func matchesSetUnderRandomMutation(seed: UInt64, range: UInt32) {
        var random = SeededRandomNumberGenerator(seed: seed)
        var set = SlotSet()
        var model = Set<UInt32>()
        for step in 0..<40_000 {
            let slot = UInt32.random(in: 0..<range, using: &random)
            // Grow for the first half, shrink in the second.
            if Int.random(in: 0..<10, using: &random) < (step < 20_000 ? 8 : 2) {
                #expect(set.insert(slot) == model.insert(slot).inserted)
            } else {
                #expect(set.remove(slot) == (model.remove(slot) != nil))
            }
            if step % 4000 == 0 {
                #expect(set.isValid)
                #expect(set.slots == model.sorted())
            }
        }
        #expect(set.count == model.count)
        #expect(set.slots == model.sorted())
        #expect(Array(set) == model.sorted())
        var visited: [UInt32] = []
        set.forEach { visited.append($0) }
        #expect(visited == model.sorted())
        for probe in 0..<2000 {
            let slot = UInt32(probe) &* 97 % range
            #expect(set.contains(slot) == model.contains(slot))
        }
    }

    /// Batches inserted at once (of 0 to 3000 slots in any order, with repeats, some under the
    /// merge threshold), between removals, checked against `Set<UInt32>`: what each batch reports
    /// inserted is what was not a member, each once, and chunks cross the array/bitmap boundary
    /// both ways (a merge that passes the array limit becomes a bitmap).
    @Test(arguments: [(31, 70_000), (32, 9000), (33, 300_000), (34, 140_000)] as [(UInt64, UInt32)])
    func batchInsertsMatchSet(seed: UInt64, range: UInt32) {
        var random = SeededRandomNumberGenerator(seed: seed)
        var set = SlotSet()
        var model = Set<UInt32>()
        for round in 0..<60 {
            let size = [0, 1, 15, 16, 300, 3000][Int.random(in: 0..<6, using: &random)]
            let batch = (0..<size).map { _ in UInt32.random(in: 0..<range, using: &random) }
            let repeats = batch.prefix(size / 10)
            let slots = (batch + repeats).shuffled(using: &random)
            let inserted = set.insert(contentsOf: slots)
            let expected = Set(slots).subtracting(model)
            #expect(inserted.count == expected.count, "round \(round): an inserted slot reported twice or missed")
            #expect(Set(inserted) == expected, "round \(round)")
            model.formUnion(slots)
            #expect(set.count == model.count)
            #expect(set.isValid)
            if round % 3 == 2 {
                for slot in model.shuffled(using: &random).prefix(model.count / 3) {
                    let removed = set.remove(slot)
                    #expect(removed)
                    model.remove(slot)
                }
            }
        }
        #expect(set.slots == model.sorted())
    }

    /// The radix sort the merged inserts use sorts as `sorted()` does: every byte of the slots
    /// varying or shared (skipped), repeats, runs of one value, sizes around the passes' edges.
    @Test(arguments: [(41, 300), (42, 1 << 16), (43, 1 << 24), (44, UInt32.max)] as [(UInt64, UInt32)])
    func radixSortMatchesSorted(seed: UInt64, bound: UInt32) {
        var random = SeededRandomNumberGenerator(seed: seed)
        for _ in 0..<200 {
            let size = [0, 1, 2, 3, 255, 256, 257, 1000][Int.random(in: 0..<8, using: &random)]
            let high = UInt32.random(in: 0...bound, using: &random)
            let slots = (0..<size).map { _ in
                Int.random(in: 0..<8, using: &random) == 0 ? high : UInt32.random(in: 0...bound, using: &random)
            }
            #expect(SlotRadixSort.sorted(slots) == slots.sorted(), "\(size) slots up to \(bound)")
        }
    }

    /// Every bitmap decoder this CPU runs gives the members, from just above the array limit to
    /// full chunks, over several chunks and a partial last one.
    @Test(arguments: [0.07, 0.5, 0.93, 1.0])
    func everyBitmapDecoderGivesTheMembers(density: Double) {
        var random = SeededRandomNumberGenerator(seed: 21)
        let members = (0..<UInt32(3 * 65536 + 777)).filter { _ in Double.random(in: 0..<1, using: &random) < density }
        let set = SlotSet(members)
        #expect(set.isBitmapChunk(0) == true)
        for decoder in SlotBitmapDecoder.available {
            #expect(set.slots(decoder: decoder) == members, "decoder \(decoder)")
        }
    }

    @Test func chunksSwitchRepresentationAtTheBoundary() {
        var set = SlotSet()
        for slot in 0..<UInt32(4096) { set.insert(slot) }
        #expect(set.isBitmapChunk(0) == false)
        set.insert(5000)
        #expect(set.isBitmapChunk(0) == true)
        set.remove(5000)
        #expect(set.isBitmapChunk(0) == false)
        #expect(set.isBitmapChunk(1) == nil)
        #expect(set.isValid)
    }

    @Test(arguments: [11, 12, 13, 14, 15, 16] as [UInt64])
    func setAlgebraMatchesSet(seed: UInt64) {
        var random = SeededRandomNumberGenerator(seed: seed)
        func randomSet() -> Set<UInt32> {
            let range = UInt32.random(in: 1...400_000, using: &random)
            let count = Int.random(in: 0...60_000, using: &random)
            return Set((0..<count).map { _ in UInt32.random(in: 0..<range, using: &random) })
        }
        let a = randomSet()
        let b = randomSet()
        let x = SlotSet(a)
        let y = SlotSet(b)
        let checks: [(SlotSet, Set<UInt32>)] = [
            (x.intersection(y), a.intersection(b)), (x.union(y), a.union(b)),
            (x.subtracting(y), a.subtracting(b)), (y.subtracting(x), b.subtracting(a)),
            (x.intersection(x), a), (x.subtracting(x), []), (x.union(SlotSet()), a),
        ]
        for (result, expected) in checks {
            #expect(result.isValid)
            #expect(result.count == expected.count)
            #expect(result.slots == expected.sorted())
        }
    }

    @Test func equalityIsSetEquality() {
        var incremental = SlotSet()
        for slot in stride(from: UInt32(0), to: 200_000, by: 3) { incremental.insert(slot) }
        for slot in stride(from: UInt32(0), to: 200_000, by: 6) { incremental.remove(slot) }
        let bulk = SlotSet(stride(from: UInt32(3), to: 200_000, by: 6))
        #expect(incremental == bulk)
        #expect(incremental.hashValue == bulk.hashValue)
        #expect(SlotSet([1, 1, 2]) == SlotSet([2, 1]))
        #expect(SlotSet([UInt32.max, 0]).slots == [0, UInt32.max])
    }
}

@Suite("SlotTopicLists")
struct SlotTopicListsTests {
    /// Random appends and removals over a few slots with long lists (many chained blocks, block
    /// reuse through the free list), against a dictionary of sets.
    @Test(arguments: [21, 22, 23] as [UInt64])
    func matchesDictionaryOfSets(seed: UInt64) {
        var random = SeededRandomNumberGenerator(seed: seed)
        var lists = SlotTopicLists()
        var model: [UInt32: Set<UInt32>] = [:]
        for step in 0..<30_000 {
            let slot = UInt32.random(in: 0..<40, using: &random)
            let id = UInt32.random(in: 0..<120, using: &random)
            switch Int.random(in: 0..<100, using: &random) {
            case 0..<60:
                if model[slot, default: []].insert(id).inserted { lists.append(id, to: slot) }
            case 60..<98:
                #expect(lists.remove(id, from: slot) == (model[slot]?.remove(id) != nil))
            default:
                #expect(Set(lists.removeAll(of: slot)) == model[slot, default: []])
                model[slot] = []
            }
            if step % 1000 == 0 {
                for probe in 0..<UInt32(41) {
                    #expect(lists.count(of: probe) == model[probe, default: []].count)
                    #expect(Set(lists.ids(of: probe)) == model[probe, default: []])
                }
            }
        }
        #expect(lists.count(of: 1_000_000) == 0)
        #expect(lists.ids(of: 1_000_000).isEmpty)
    }
}
