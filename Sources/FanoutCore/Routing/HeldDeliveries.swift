internal import CFanoutIntrinsics

/// The deliveries one consumer holds unacknowledged: a set of delivery ids, inserted at every
/// hand-out and removed at every acknowledgement.
///
/// Open addressing with linear probing and removal by shifting followers back (no tombstones),
/// like `SlotHashIndex`. An id is mixed with SplitMix64's finaliser under a seed drawn per set, so
/// the ids an ACK names (a client's choice) cannot be picked to collide: as safe as `Set`'s
/// SipHash for this use, at a fraction of its cost (`Set<DeliveryID>`'s hashing was about 12% of
/// the server's CPU while consumers drained a topic send).
struct HeldDeliveries: Sequence {
    /// `nil`: an empty bucket.
    private var buckets: [DeliveryID?]
    private let seed: UInt64
    private(set) var count = 0

    init(seed: UInt64 = .random(in: .min ... .max)) {
        self.buckets = Array(repeating: nil, count: 16)
        self.seed = seed
    }

    private var mask: Int { self.buckets.count - 1 }

    @inline(__always)
    private func home(_ id: DeliveryID) -> Int {
        var x = id.messageSequence ^ self.seed ^ (UInt64(id.slot) &* 0x9E37_79B9_7F4A_7C15)
        x = (x ^ (x >> 30)) &* 0xBF58_476D_1CE4_E5B9
        x = (x ^ (x >> 27)) &* 0x94D0_49BB_1331_11EB
        x ^= x >> 31
        return Int(truncatingIfNeeded: x) & self.mask
    }

    /// The bucket holding `id`, or the empty bucket where it would go.
    @inline(__always)
    private func position(of id: DeliveryID) -> (index: Int, found: Bool) {
        var index = self.home(id)
        while let held = self.buckets[index] {
            if held == id { return (index, true) }
            index = (index + 1) & self.mask
        }
        return (index, false)
    }

    /// Asks the CPU for the bucket where `id` would be, without waiting: an ACK's ids are removed
    /// one after another, each from a bucket of its own.
    func prefetch(_ id: DeliveryID) {
        self.buckets.withUnsafeBufferPointer { buckets in
            fanout_prefetch(buckets.baseAddress! + self.home(id))
        }
    }

    func contains(_ id: DeliveryID) -> Bool {
        self.position(of: id).found
    }

    /// Adds `id`; false when it was held already.
    @discardableResult
    mutating func insert(_ id: DeliveryID) -> Bool {
        if (self.count + 1) * 2 > self.buckets.count {
            self.grow()
        }
        let (index, found) = self.position(of: id)
        guard !found else { return false }
        self.buckets[index] = id
        self.count += 1
        return true
    }

    /// Removes `id`; false when it was not held.
    @discardableResult
    mutating func remove(_ id: DeliveryID) -> Bool {
        var (hole, found) = self.position(of: id)
        guard found else { return false }
        self.buckets[hole] = nil
        self.count -= 1
        // Move back each follower whose home is not between the hole and itself (cyclically), so
        // that every id stays reachable from its home without crossing an empty bucket.
        var index = (hole + 1) & self.mask
        while let follower = self.buckets[index] {
            let home = self.home(follower)
            let reachable = hole <= index ? (home > hole && home <= index) : (home > hole || home <= index)
            if !reachable {
                self.buckets[hole] = follower
                self.buckets[index] = nil
                hole = index
            }
            index = (index + 1) & self.mask
        }
        return true
    }

    private mutating func grow() {
        let old = self.buckets
        self.buckets = Array(repeating: nil, count: old.count * 2)
        for case let id? in old {
            self.buckets[self.position(of: id).index] = id
        }
    }

    func makeIterator() -> some IteratorProtocol<DeliveryID> {
        self.buckets.lazy.compactMap { $0 }.makeIterator()
    }
}
