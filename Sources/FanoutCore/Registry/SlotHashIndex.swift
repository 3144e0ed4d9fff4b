/// An open-addressing hash table from a key to a slot, for keys that live elsewhere (the registry's
/// records): each 8-byte bucket holds a 32-bit fingerprint of the key's hash and the slot, and the
/// caller confirms a candidate by comparing the real key. With 163-byte tokens, a lookup compares
/// one key (the match) instead of one per probed bucket, and a bucket costs 8 bytes instead of the
/// 20-28 of a `Dictionary<Key, UInt32>`.
///
/// Linear probing; the home bucket is the top bits of the fingerprint, so growing redistributes
/// buckets without rehashing keys; removal shifts followers back (no tombstones). Hashes come from
/// `Hasher` (per-process random seed), so colliding keys cannot be chosen by clients.
package struct SlotHashIndex {
    /// `fingerprint << 32 | (slot + 1)`; 0 is an empty bucket.
    private var buckets: [UInt64]
    private var shift: UInt32
    package private(set) var count = 0

    package init() {
        self.buckets = [UInt64](repeating: 0, count: 16)
        self.shift = 32 - 4
    }

    private var mask: Int { self.buckets.count - 1 }

    @inline(__always)
    private static func fingerprint(_ hash: Int) -> UInt32 {
        UInt32(truncatingIfNeeded: UInt64(bitPattern: Int64(hash)) >> 32)
    }

    @inline(__always)
    private func home(_ fingerprint: UInt32) -> Int {
        Int(fingerprint >> self.shift)
    }

    /// The slot whose key has `hash` and satisfies `isMatch`, if any.
    @inline(__always)
    package func find(hash: Int, where isMatch: (UInt32) -> Bool) -> UInt32? {
        let fingerprint = Self.fingerprint(hash)
        var position = self.home(fingerprint)
        while let match = self.nextBucket(holding: fingerprint, from: position) {
            if isMatch(match.slot) { return match.slot }
            position = (match.position + 1) & self.mask
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

    /// The first bucket at or after `position` (probing on) that holds `fingerprint`, or nil at
    /// the first empty bucket.
    @inline(__always)
    private func nextBucket(holding fingerprint: UInt32, from position: Int) -> (slot: UInt32, position: Int)? {
        var position = position
        while true {
            let bucket = self.buckets[position]
            if bucket == 0 { return nil }
            if UInt32(truncatingIfNeeded: bucket >> 32) == fingerprint {
                return (UInt32(truncatingIfNeeded: bucket) &- 1, position)
            }
            position = (position + 1) & self.mask
        }
    }

    /// Adds `slot` under `hash`. The caller ensures its key is not in the table.
    package mutating func insert(hash: Int, slot: UInt32) {
        if (self.count + 1) * 4 > self.buckets.count * 3 {
            self.grow()
        }
        self.place(UInt64(Self.fingerprint(hash)) << 32 | UInt64(slot &+ 1))
        self.count += 1
    }

    /// Removes the entry for `slot` stored under `hash`; returns false if there is none.
    @discardableResult
    package mutating func remove(hash: Int, slot: UInt32) -> Bool {
        let wanted = UInt64(Self.fingerprint(hash)) << 32 | UInt64(slot &+ 1)
        var hole = self.home(Self.fingerprint(hash))
        while self.buckets[hole] != wanted {
            if self.buckets[hole] == 0 { return false }
            hole = (hole + 1) & self.mask
        }
        // Backward-shift deletion: move later entries of the run into the hole when their home
        // bucket is at or before the hole.
        var next = hole
        while true {
            next = (next + 1) & self.mask
            let bucket = self.buckets[next]
            if bucket == 0 { break }
            let displacement = (next - self.home(UInt32(truncatingIfNeeded: bucket >> 32))) & self.mask
            if displacement >= (next - hole) & self.mask {
                self.buckets[hole] = bucket
                hole = next
            }
        }
        self.buckets[hole] = 0
        self.count -= 1
        return true
    }

    private mutating func place(_ bucket: UInt64) {
        var position = self.home(UInt32(truncatingIfNeeded: bucket >> 32))
        while self.buckets[position] != 0 {
            position = (position + 1) & self.mask
        }
        self.buckets[position] = bucket
    }

    private mutating func grow() {
        let old = self.buckets
        self.buckets = [UInt64](repeating: 0, count: old.count * 2)
        self.shift -= 1
        for bucket in old where bucket != 0 {
            self.place(bucket)
        }
    }
}
