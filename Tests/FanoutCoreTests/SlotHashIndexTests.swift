import FanoutCore
import FanoutTestSupport
import Testing

@Suite("SlotHashIndex")
struct SlotHashIndexTests {
    /// Keys are slots; their "hash" comes from a tiny space, so fingerprints collide constantly and
    /// runs are long and reach into the overflow tail: insertion, lookup and backward-shift removal
    /// are checked against a dictionary after every step.
    @Test(arguments: [(31, 8), (32, 64), (33, 1 << 20)] as [(UInt64, Int)])
    func matchesDictionary(seed: UInt64, hashSpace: Int) {
        var random = SeededRandomNumberGenerator(seed: seed)
        var index = SlotHashIndex()
        var model: [UInt32: Int] = [:]  // slot -> hash
        func hash(_ slot: UInt32) -> Int {
            // Spread the small space over the top bits (where the home bucket comes from).
            (Int(slot) % hashSpace) &* -7_046_029_254_386_353_131
        }
        func fingerprint(_ hash: Int) -> UInt64 { UInt64(bitPattern: Int64(hash)) >> 32 }
        for step in 0..<20_000 {
            let slot = UInt32.random(in: 0..<600, using: &random)
            if Int.random(in: 0..<100, using: &random) < 55 {
                if model[slot] == nil {
                    index.insert(hash: hash(slot), slot: slot)
                    model[slot] = hash(slot)
                }
            } else {
                #expect(index.remove(hash: hash(slot), slot: slot) == (model.removeValue(forKey: slot) != nil))
            }
            if step % 500 == 0 {
                #expect(index.count == model.count)
                for probe in 0..<UInt32(600) {
                    let found = index.find(hash: hash(probe)) { $0 == probe }
                    #expect(found == (model[probe] != nil ? probe : nil))
                    // The candidate: some stored slot with the probe's fingerprint, or none when no
                    // stored slot has it.
                    let sameFingerprint = model.values.contains { fingerprint($0) == fingerprint(hash(probe)) }
                    if let candidate = index.candidate(hash: hash(probe)) {
                        #expect(model[candidate].map(fingerprint) == fingerprint(hash(probe)))
                    } else {
                        #expect(!sameFingerprint)
                    }
                }
            }
        }
    }

    /// The table holds at most 7/8 of its home buckets and grows by half again: with keys of
    /// random hashes, it stays within 12/7 buckets per key (plus the tail) as it grows to 300,000
    /// keys, and shrinks to fit again no lower than 8/7 (a table that doubled would reach 16/7).
    @Test func bucketsPerKeyStayBounded() {
        var random = SeededRandomNumberGenerator(seed: 34)
        var index = SlotHashIndex()
        var hashes: [Int] = []
        for slot in 0..<UInt32(300_000) {
            let hash = Int.random(in: .min ... .max, using: &random)
            index.insert(hash: hash, slot: slot)
            hashes.append(hash)
            let keys = Double(max(index.count, 16))
            #expect(Double(index.bucketCount) <= keys * 12 / 7 * 1.02 + 128, "at \(index.count) keys")
            #expect(Double(index.bucketCount) >= Double(index.count) * 8 / 7, "at \(index.count) keys")
        }
        for (slot, hash) in hashes.enumerated() {
            #expect(index.find(hash: hash) { $0 == UInt32(slot) } == UInt32(slot))
        }
    }
}
