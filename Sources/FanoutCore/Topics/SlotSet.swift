/// A set of installation slots (dense `UInt32`s), compact and fast to enumerate and to combine.
///
/// The slot space is cut into chunks of 65536 (the high 16 bits); each non-empty chunk keeps its
/// members as a sorted `UInt16` array while it has at most 4096 of them (2 bytes per member) and as
/// an 8 KiB bitmap above that (at most 1 bit per possible member): the Roaring bitmap layout. A
/// topic with 1M subscribers among 2M installations is about 256 KiB, and intersections, unions and
/// differences work a word (64 slots) at a time where chunks are dense.
///
/// `SlotSet` is a value with copy-on-write storage: copying one out of the index under a lock is a
/// retain, and set algebra on the copy runs without the lock.
///
/// A storage detail, not the engine's API: public only as `@_spi(Storage)`, for the tests and the
/// benchmarks (`@_spi(Storage) import FanoutCore`); callers get an `Audience`.
@_spi(Storage)
public struct SlotSet: Hashable, Sendable, Sequence {
    /// The high 16 bits of each non-empty chunk, ascending.
    private var keys: [UInt16]
    /// The chunk for `keys[i]`; never empty.
    private var containers: [SlotContainer]
    /// The number of members.
    public private(set) var count: Int

    /// The empty set.
    public init() {
        self.keys = []
        self.containers = []
        self.count = 0
    }

    /// A set of the given slots (any order, duplicates allowed).
    public init(_ slots: some Sequence<UInt32>) {
        var sorted = Array(slots)
        sorted.sort()
        self.init(sortedUnique: sorted)
    }

    /// A set of `slots`, which are ascending (duplicates are skipped); no sort.
    init(sortedUnique sorted: [UInt32]) {
        self.init()
        var chunk = [UInt16]()
        var currentKey: UInt16? = nil
        for slot in sorted {
            let key = UInt16(truncatingIfNeeded: slot >> 16)
            let low = UInt16(truncatingIfNeeded: slot)
            if key != currentKey {
                self.appendChunk(currentKey, chunk)
                chunk.removeAll(keepingCapacity: true)
                currentKey = key
            }
            if chunk.last != low || chunk.isEmpty {
                chunk.append(low)
            }
        }
        self.appendChunk(currentKey, chunk)
    }

    private mutating func appendChunk(_ key: UInt16?, _ sortedValues: [UInt16]) {
        guard let key, !sortedValues.isEmpty else { return }
        self.keys.append(key)
        self.containers.append(.fromSorted(sortedValues))
        self.count += sortedValues.count
    }

    public var isEmpty: Bool { self.count == 0 }

    // MARK: - Members

    public func contains(_ slot: UInt32) -> Bool {
        guard let index = self.index(ofKey: UInt16(truncatingIfNeeded: slot >> 16)) else { return false }
        return self.containers[index].contains(UInt16(truncatingIfNeeded: slot))
    }

    /// Inserts `slot`; returns false when it was already a member.
    @discardableResult
    public mutating func insert(_ slot: UInt32) -> Bool {
        let key = UInt16(truncatingIfNeeded: slot >> 16)
        let position = self.position(ofKey: key)
        if !position.found {
            self.keys.insert(key, at: position.index)
            self.containers.insert(SlotContainer(), at: position.index)
        }
        let inserted = self.containers[position.index].insert(UInt16(truncatingIfNeeded: slot))
        if inserted { self.count += 1 }
        self.checkLocalInvariants(at: position.index)
        return inserted
    }

    /// Inserts every slot of `slots` (any order, repeats allowed); returns those that were not
    /// members, each once. A set of bitmap chunks takes them one at a time (a bit each); otherwise
    /// (an empty set too) they are sorted and each chunk's share is merged into it at once, where
    /// inserting them one at a time searched and shifted a sorted array for each.
    public mutating func insert(contentsOf slots: [UInt32]) -> [UInt32] {
        var inserted: [UInt32] = []
        inserted.reserveCapacity(slots.count)
        let bitmapsOnly = !self.containers.isEmpty && self.containers.allSatisfy(\.isBitmap)
        if slots.count < SlotContainer.mergeThreshold || bitmapsOnly {
            for slot in slots where self.insert(slot) { inserted.append(slot) }
            return inserted
        }
        let sorted = SlotRadixSort.sorted(slots)
        var start = 0
        while start < sorted.count {
            let key = UInt16(truncatingIfNeeded: sorted[start] >> 16)
            var end = start + 1
            while end < sorted.count && UInt16(truncatingIfNeeded: sorted[end] >> 16) == key { end += 1 }
            let position = self.position(ofKey: key)
            if !position.found {
                self.keys.insert(key, at: position.index)
                self.containers.insert(SlotContainer(), at: position.index)
            }
            let before = inserted.count
            self.containers[position.index].insert(sorted: sorted[start..<end], into: &inserted)
            self.count += inserted.count - before
            self.checkLocalInvariants(at: position.index)
            start = end
        }
        return inserted
    }

    /// Removes `slot`; returns false when it was not a member.
    @discardableResult
    public mutating func remove(_ slot: UInt32) -> Bool {
        guard let index = self.index(ofKey: UInt16(truncatingIfNeeded: slot >> 16)) else { return false }
        guard self.containers[index].remove(UInt16(truncatingIfNeeded: slot)) else { return false }
        self.count -= 1
        if self.containers[index].isEmpty {
            self.keys.remove(at: index)
            self.containers.remove(at: index)
        } else {
            self.checkLocalInvariants(at: index)
        }
        return true
    }

    // MARK: - Enumeration

    /// Calls `body` with every member in ascending order. Faster than iterating the `Sequence`.
    public func forEach(_ body: (UInt32) throws -> Void) rethrows {
        for index in self.keys.indices {
            try self.containers[index].forEach(high: UInt32(self.keys[index]), body)
        }
    }

    /// The members in ascending order, as one array.
    public var slots: [UInt32] {
        self.slots(decoder: .best)
    }

    /// The members in ascending order, bitmaps decoded by `decoder`.
    public func slots(decoder: SlotBitmapDecoder) -> [UInt32] {
        // Spare room for the bitmap decoder's 8- or 16-lane stores past the last member.
        [UInt32](unsafeUninitializedCapacity: self.count + 16) { buffer, initialized in
            guard var out = buffer.baseAddress else { return }
            for index in self.keys.indices {
                out = self.containers[index].write(high: UInt32(self.keys[index]), to: out, decoder: decoder)
            }
            initialized = self.count
        }
    }

    public func makeIterator() -> Iterator {
        Iterator(set: self)
    }

    /// Iterates the members in ascending order.
    public struct Iterator: IteratorProtocol {
        private let set: SlotSet
        private var chunk = 0
        private var position = 0
        private var word: UInt64 = 0

        fileprivate init(set: SlotSet) {
            self.set = set
            if let first = set.containers.first, first.isBitmap {
                self.word = first.words[0]
            }
        }

        public mutating func next() -> UInt32? {
            while self.chunk < self.set.containers.count {
                let container = self.set.containers[self.chunk]
                let base = UInt32(self.set.keys[self.chunk]) << 16
                if container.isBitmap {
                    while true {
                        if self.word != 0 {
                            let bit = self.word.trailingZeroBitCount
                            self.word &= self.word &- 1
                            return base | UInt32(self.position << 6 | bit)
                        }
                        self.position += 1
                        guard self.position < SlotContainer.wordCount else { break }
                        self.word = container.words[self.position]
                    }
                } else if self.position < container.values.count {
                    defer { self.position += 1 }
                    return base | UInt32(container.values[self.position])
                }
                self.chunk += 1
                self.position = 0
                if self.chunk < self.set.containers.count, self.set.containers[self.chunk].isBitmap {
                    self.word = self.set.containers[self.chunk].words[0]
                }
            }
            return nil
        }
    }

    // MARK: - Set algebra

    /// The slots in both sets.
    public func intersection(_ other: SlotSet) -> SlotSet {
        var result = SlotSet()
        var i = 0
        var j = 0
        while i < self.keys.count && j < other.keys.count {
            let a = self.keys[i]
            let b = other.keys[j]
            if a < b {
                i += 1
            } else if a > b {
                j += 1
            } else {
                result.append(a, self.containers[i].intersection(other.containers[j]))
                i += 1
                j += 1
            }
        }
        result.checkInvariants()
        return result
    }

    /// The slots in either set.
    public func union(_ other: SlotSet) -> SlotSet {
        var result = SlotSet()
        var i = 0
        var j = 0
        while i < self.keys.count || j < other.keys.count {
            if j == other.keys.count || (i < self.keys.count && self.keys[i] < other.keys[j]) {
                result.append(self.keys[i], self.containers[i])
                i += 1
            } else if i == self.keys.count || other.keys[j] < self.keys[i] {
                result.append(other.keys[j], other.containers[j])
                j += 1
            } else {
                result.append(self.keys[i], self.containers[i].union(other.containers[j]))
                i += 1
                j += 1
            }
        }
        result.checkInvariants()
        return result
    }

    /// The slots of `self` that are not in `other`.
    public func subtracting(_ other: SlotSet) -> SlotSet {
        var result = SlotSet()
        var j = 0
        for i in self.keys.indices {
            let key = self.keys[i]
            while j < other.keys.count && other.keys[j] < key { j += 1 }
            if j < other.keys.count && other.keys[j] == key {
                result.append(key, self.containers[i].subtracting(other.containers[j]))
            } else {
                result.append(key, self.containers[i])
            }
        }
        result.checkInvariants()
        return result
    }

    private mutating func append(_ key: UInt16, _ container: SlotContainer) {
        guard !container.isEmpty else { return }
        self.keys.append(key)
        self.containers.append(container)
        self.count += container.count
    }

    // MARK: - Lookup helpers

    private func index(ofKey key: UInt16) -> Int? {
        let position = self.position(ofKey: key)
        return position.found ? position.index : nil
    }

    private func position(ofKey key: UInt16) -> (found: Bool, index: Int) {
        // Slots are dense, so the chunk is usually at index `key` or just before it.
        if Int(key) < self.keys.count && self.keys[Int(key)] == key {
            return (true, Int(key))
        }
        var low = 0
        var high = self.keys.count
        while low < high {
            let middle = (low + high) >> 1
            if self.keys[middle] < key {
                low = middle + 1
            } else if self.keys[middle] > key {
                high = middle
            } else {
                return (true, middle)
            }
        }
        return (false, low)
    }

    // MARK: - Invariants

    /// After a single-member mutation: the touched chunk is in canonical form and sits between its
    /// neighbours. O(1), under `FANOUT_INTERNAL_CHECKS` (debug builds); a no-op otherwise.
    @inline(__always)
    private func checkLocalInvariants(at index: Int) {
        #if FANOUT_INTERNAL_CHECKS
        let container = self.containers[index]
        precondition(self.keys.count == self.containers.count, "SlotSet: keys and containers out of step")
        precondition(!container.isEmpty, "SlotSet: empty chunk kept")
        precondition(
            container.isBitmap ? container.count > SlotContainer.arrayLimit : container.values.count == container.count,
            "SlotSet: chunk not in canonical form"
        )
        precondition(index == 0 || self.keys[index - 1] < self.keys[index], "SlotSet: keys out of order")
        precondition(index == self.keys.count - 1 || self.keys[index] < self.keys[index + 1], "SlotSet: keys out of order")
        #endif
    }

    /// Verifies the whole representation under `FANOUT_INTERNAL_CHECKS` (debug builds); a no-op otherwise.
    @inline(__always)
    func checkInvariants() {
        #if FANOUT_INTERNAL_CHECKS
        precondition(self.isValid, "SlotSet invariant violated")
        #endif
    }

    /// Keys strictly ascending, one non-empty canonical container per key, `count` exact.
    package var isValid: Bool {
        guard self.keys.count == self.containers.count else { return false }
        guard zip(self.keys, self.keys.dropFirst()).allSatisfy({ $0 < $1 }) else { return false }
        guard self.containers.allSatisfy({ !$0.isEmpty && $0.checkInvariants() }) else { return false }
        return self.containers.reduce(0) { $0 + $1.count } == self.count
    }

    /// Whether chunk `high` is stored as a bitmap (`nil` when the chunk is empty). For tests.
    package func isBitmapChunk(_ high: UInt16) -> Bool? {
        self.index(ofKey: high).map { self.containers[$0].isBitmap }
    }
}
