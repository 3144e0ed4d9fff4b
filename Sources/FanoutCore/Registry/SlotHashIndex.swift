internal import CFanoutIntrinsics

/// An open-addressing hash table from a key to a slot, for keys that live elsewhere (the registry's
/// records): each 8-byte bucket holds a 32-bit fingerprint of the key's hash and the slot, and the
/// caller confirms a candidate by comparing the real key. With 163-byte tokens, a lookup compares
/// one key (the match) instead of one per probed bucket, and a bucket costs 8 bytes instead of the
/// 20-28 of a `Dictionary<Key, UInt32>`.
///
/// Linear probing over ordered buckets: a fingerprint's home is `fingerprint * homeCount >> 32`, so
/// homes rise with fingerprints, and the occupied buckets are kept in ascending order (each at or
/// after its home, no empty bucket in between). A probe stops at the first bucket past the one it
/// looks for, so a miss costs about what a hit does, and the table can fill to 7/8 before it grows.
/// Runs do not wrap around: past the home buckets, a tail of overflow buckets takes the last run.
/// Growing redistributes buckets in one ordered pass without rehashing keys, by half again (not
/// double), so the table takes 9.1-13.7 bytes per key. Removal shifts followers back (no
/// tombstones). Hashes are keyed SipHash (`Hasher` for FIDs, `SipHash.process` for tokens, both
/// with per-process random keys), so colliding keys cannot be chosen by clients.
package struct SlotHashIndex {
    /// `fingerprint << 32 | (slot + 1)`; 0 is an empty bucket. The last bucket is always empty.
    private var buckets: [UInt64]
    /// The buckets a fingerprint can call home; the rest are the overflow tail.
    private var homeCount: Int
    package private(set) var count = 0

    /// The load past which the table grows.
    private static let maximumLoad = (numerator: 7, denominator: 8)
    /// The overflow tail a table starts with (more is added when a run reaches its end).
    private static let tailCount = 64

    package init() {
        self.homeCount = 16
        self.buckets = [UInt64](repeating: 0, count: 16 + Self.tailCount)
    }

    /// The table's size in buckets (8 bytes each), home and tail.
    package var bucketCount: Int { self.buckets.count }

    @inline(__always)
    private static func fingerprint(_ hash: Int) -> UInt32 {
        UInt32(truncatingIfNeeded: UInt64(bitPattern: Int64(hash)) >> 32)
    }

    @inline(__always)
    private func home(_ fingerprint: UInt32) -> Int {
        Self.home(fingerprint, homeCount: self.homeCount)
    }

    @inline(__always)
    private func home(ofBucket bucket: UInt64) -> Int {
        Self.home(UInt32(truncatingIfNeeded: bucket >> 32), homeCount: self.homeCount)
    }

    @inline(__always)
    private static func home(_ fingerprint: UInt32, homeCount: Int) -> Int {
        Int(truncatingIfNeeded: (UInt64(fingerprint) &* UInt64(homeCount)) >> 32)
    }

    /// The slot whose key has `hash` and satisfies `isMatch`, if any.
    @inline(__always)
    package func find(hash: Int, where isMatch: (UInt32) -> Bool) -> UInt32? {
        let fingerprint = Self.fingerprint(hash)
        var position = self.home(fingerprint)
        while let match = self.nextBucket(holding: fingerprint, from: position) {
            if isMatch(match.slot) { return match.slot }
            position = match.position + 1
        }
        return nil
    }

    /// The first slot stored under `hash`'s fingerprint, not yet confirmed against its key: the
    /// first step of a lookup that confirms candidates later, in bulk, after touching their keys
    /// (`InstallationRegistry.slots(for:)`). A key may still be in the table when its candidate
    /// does not match (two fingerprints alike); `find` settles that.
    @inline(__always)
    package func candidate(hash: Int) -> UInt32? {
        let fingerprint = Self.fingerprint(hash)
        return self.nextBucket(holding: fingerprint, from: self.home(fingerprint))?.slot
    }

    /// Asks the cache for `hash`'s home bucket, ahead of a `candidate` or `find` for it.
    @inline(__always)
    package func prefetch(hash: Int) {
        let home = self.home(Self.fingerprint(hash))
        self.buckets.withUnsafeBufferPointer { fanout_prefetch($0.baseAddress! + home) }
    }

    /// The first bucket at or after `position` that holds `fingerprint`, or nil at the first
    /// bucket that is empty or holds a greater fingerprint.
    @inline(__always)
    private func nextBucket(holding fingerprint: UInt32, from position: Int) -> (slot: UInt32, position: Int)? {
        var position = position
        while true {
            let bucket = self.buckets[position]
            let stored = UInt32(truncatingIfNeeded: bucket >> 32)
            if bucket == 0 || stored > fingerprint { return nil }
            if stored == fingerprint {
                return (UInt32(truncatingIfNeeded: bucket) &- 1, position)
            }
            position += 1
        }
    }

    /// Adds `slot` under `hash`. The caller ensures its key is not in the table.
    package mutating func insert(hash: Int, slot: UInt32) {
        if (self.count + 1) * Self.maximumLoad.denominator > self.homeCount * Self.maximumLoad.numerator {
            self.grow()
        }
        let bucket = UInt64(Self.fingerprint(hash)) << 32 | UInt64(slot &+ 1)
        var position = self.home(ofBucket: bucket)
        while self.buckets[position] != 0 && self.buckets[position] < bucket {
            position += 1
        }
        var empty = position
        while self.buckets[empty] != 0 {
            empty += 1
        }
        self.buckets.withUnsafeMutableBufferPointer { buckets in
            // Shift the rest of the run up by one, into the empty bucket that ends it.
            var index = empty
            while index > position {
                buckets[index] = buckets[index - 1]
                index -= 1
            }
            buckets[position] = bucket
        }
        if empty == self.buckets.count - 1 {
            self.extendTail()
        }
        self.count += 1
    }

    /// Removes the entry for `slot` stored under `hash`; returns false if there is none.
    @discardableResult
    package mutating func remove(hash: Int, slot: UInt32) -> Bool {
        let wanted = UInt64(Self.fingerprint(hash)) << 32 | UInt64(slot &+ 1)
        var hole = self.home(ofBucket: wanted)
        while self.buckets[hole] != wanted {
            if self.buckets[hole] == 0 || self.buckets[hole] > wanted { return false }
            hole += 1
        }
        // Shift back the followers that sit past their home, up to the first that is at its home
        // (or an empty bucket): each stays at or after its home, and the order is kept.
        let homeCount = self.homeCount
        self.buckets.withUnsafeMutableBufferPointer { buckets in
            var next = hole + 1
            while buckets[next] != 0 && Self.home(UInt32(truncatingIfNeeded: buckets[next] >> 32), homeCount: homeCount) < next {
                buckets[hole] = buckets[next]
                hole = next
                next += 1
            }
            buckets[hole] = 0
        }
        self.count -= 1
        return true
    }

    /// Adds overflow buckets after the last, by a fraction of the table (not Array's doubling).
    private mutating func extendTail() {
        let added = max(Self.tailCount, self.homeCount / 64)
        self.buckets.reserveCapacity(self.buckets.count + added)
        self.buckets.append(contentsOf: repeatElement(0, count: added))
    }

    /// Half again as many home buckets; the entries, read in their order, are placed each at its
    /// new home or right after the one placed before it.
    private mutating func grow() {
        let old = self.buckets
        self.homeCount += self.homeCount / 2
        self.buckets = [UInt64](repeating: 0, count: self.homeCount + Self.tailCount)
        var next = 0
        for bucket in old where bucket != 0 {
            let position = max(self.home(ofBucket: bucket), next)
            while position >= self.buckets.count - 1 {
                self.extendTail()
            }
            self.buckets[position] = bucket
            next = position + 1
        }
    }
}
