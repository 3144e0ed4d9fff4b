/// One 65536-slot chunk of a `SlotSet`: the low 16 bits of its members, either as a sorted array
/// (at most 4096 members, 2 bytes each) or as a 1024-word bitmap (more than 4096 members, 8 KiB),
/// whichever is smaller. The representation is canonical for a given member set, so the
/// synthesized `Hashable` is set equality.
struct SlotContainer: Hashable, Sendable {
    /// The largest member count kept as an array; above it the bitmap is smaller.
    static let arrayLimit = 4096
    static let wordCount = 1024

    /// Sorted members in array mode; empty in bitmap mode.
    private(set) var values: [UInt16]
    /// 1024 words in bitmap mode; empty in array mode.
    private(set) var words: [UInt64]
    private(set) var count: Int

    var isBitmap: Bool { !self.words.isEmpty }
    var isEmpty: Bool { self.count == 0 }

    init() {
        self.values = []
        self.words = []
        self.count = 0
    }

    private init(values: [UInt16]) {
        self.values = values
        self.words = []
        self.count = values.count
    }

    /// A container from bitmap words; becomes an array when that is the canonical form.
    private init(words: [UInt64], count: Int) {
        if count <= Self.arrayLimit {
            self.init(values: Self.members(ofWords: words, count: count))
        } else {
            self.init(bitmap: words, count: count)
        }
    }

    private init(bitmap words: [UInt64], count: Int) {
        self.values = []
        self.words = words
        self.count = count
    }

    /// A container holding exactly the sorted, duplicate-free `values`.
    static func fromSorted(_ values: [UInt16]) -> SlotContainer {
        if values.count <= Self.arrayLimit {
            return SlotContainer(values: values)
        }
        var words = [UInt64](repeating: 0, count: Self.wordCount)
        for value in values {
            words[Int(value >> 6)] |= 1 << UInt64(value & 63)
        }
        return SlotContainer(words: words, count: values.count)
    }

    // MARK: - Members

    func contains(_ value: UInt16) -> Bool {
        if self.isBitmap {
            return self.words[Int(value >> 6)] & (1 << UInt64(value & 63)) != 0
        }
        return Self.search(self.values, value).found
    }

    /// Inserts `value`; returns false if it was already there.
    mutating func insert(_ value: UInt16) -> Bool {
        if self.isBitmap {
            let bit: UInt64 = 1 << UInt64(value & 63)
            let index = Int(value >> 6)
            guard self.words[index] & bit == 0 else { return false }
            self.words[index] |= bit
            self.count += 1
            return true
        }
        let (found, index) = Self.search(self.values, value)
        guard !found else { return false }
        if self.values.count == Self.arrayLimit {
            var words = [UInt64](repeating: 0, count: Self.wordCount)
            for member in self.values {
                words[Int(member >> 6)] |= 1 << UInt64(member & 63)
            }
            words[Int(value >> 6)] |= 1 << UInt64(value & 63)
            self.values = []
            self.words = words
            self.count += 1
            return true
        }
        if self.values.count == self.values.capacity {
            // Grow by a quarter rather than doubling: still amortised O(1), with less idle capacity
            // in the millions of small chunks of sparse topics.
            self.values.reserveCapacity(min(Self.arrayLimit, self.values.count + max(8, self.values.count / 4)))
        }
        self.values.insert(value, at: index)
        self.count += 1
        return true
    }

    /// Below this many slots a chunk takes them one at a time: a merge copies the whole array.
    static let mergeThreshold = 16

    /// Inserts the low 16 bits of `slots` (ascending, all in this chunk, repeats allowed), and
    /// appends to `inserted` those that were not members: into a bitmap a bit each, into an array
    /// in one merge (or one at a time when they are few), becoming a bitmap when it passes the limit.
    mutating func insert(sorted slots: ArraySlice<UInt32>, into inserted: inout [UInt32]) {
        if self.isBitmap || slots.count < Self.mergeThreshold {
            for slot in slots where self.insert(UInt16(truncatingIfNeeded: slot)) { inserted.append(slot) }
            return
        }
        var merged: [UInt16] = []
        merged.reserveCapacity(self.values.count + slots.count)
        self.values.withUnsafeBufferPointer { members in
            var next = 0
            var previous: UInt16? = nil
            for slot in slots {
                let value = UInt16(truncatingIfNeeded: slot)
                guard value != previous else { continue }  // a repeat
                previous = value
                while next < members.count && members[next] < value {
                    merged.append(members[next])
                    next += 1
                }
                guard next == members.count || members[next] != value else { continue }  // a member: copied with the rest
                merged.append(value)
                inserted.append(slot)
            }
            merged.append(contentsOf: members[next...])
        }
        self = .fromSorted(merged)
    }

    /// Removes `value`; returns false if it was not there.
    mutating func remove(_ value: UInt16) -> Bool {
        if self.isBitmap {
            let bit: UInt64 = 1 << UInt64(value & 63)
            let index = Int(value >> 6)
            guard self.words[index] & bit != 0 else { return false }
            self.words[index] &= ~bit
            self.count -= 1
            if self.count <= Self.arrayLimit {
                self.values = Self.members(ofWords: self.words, count: self.count)
                self.words = []
            }
            return true
        }
        let (found, index) = Self.search(self.values, value)
        guard found else { return false }
        self.values.remove(at: index)
        self.count -= 1
        return true
    }

    /// Calls `body` with every member, ascending, as a full slot (`high << 16 | low`).
    @inline(__always)
    func forEach(high: UInt32, _ body: (UInt32) throws -> Void) rethrows {
        let base = high << 16
        if self.isBitmap {
            for (index, word) in self.words.enumerated() {
                var word = word
                while word != 0 {
                    try body(base | UInt32(index << 6 | word.trailingZeroBitCount))
                    word &= word &- 1
                }
            }
        } else {
            for value in self.values {
                try body(base | UInt32(value))
            }
        }
    }

    /// Writes every member (as a full slot) to `output`, ascending, and returns the end. `output`
    /// must have room for `count + 16` slots: a bitmap's decoder stores 8 or 16 lanes at a time, so
    /// its stores reach past the last member.
    func write(high: UInt32, to output: UnsafeMutablePointer<UInt32>, decoder: SlotBitmapDecoder) -> UnsafeMutablePointer<UInt32> {
        let base = high << 16
        guard self.isBitmap else {
            var out = output
            self.values.withUnsafeBufferPointer { values in
                for value in values {
                    out.pointee = base | UInt32(value)
                    out += 1
                }
            }
            return out
        }
        return self.words.withUnsafeBufferPointer { decoder.decode($0, base: base, to: output) }
    }

    // MARK: - Set algebra

    func intersection(_ other: SlotContainer) -> SlotContainer {
        switch (self.isBitmap, other.isBitmap) {
        case (false, false):
            return SlotContainer(values: Self.mergeIntersect(self.values, other.values))
        case (false, true):
            return SlotContainer(values: self.values.filter { other.contains($0) })
        case (true, false):
            return SlotContainer(values: other.values.filter { self.contains($0) })
        case (true, true):
            return Self.combine(self.words, other.words) { $0 & $1 }
        }
    }

    func union(_ other: SlotContainer) -> SlotContainer {
        switch (self.isBitmap, other.isBitmap) {
        case (false, false):
            return Self.fromSorted(Self.mergeUnion(self.values, other.values))
        case (false, true):
            return other.settingBits(of: self.values)
        case (true, false):
            return self.settingBits(of: other.values)
        case (true, true):
            return Self.combine(self.words, other.words) { $0 | $1 }
        }
    }

    /// The members of `self` that are not in `other`.
    func subtracting(_ other: SlotContainer) -> SlotContainer {
        switch (self.isBitmap, other.isBitmap) {
        case (false, false):
            return SlotContainer(values: Self.mergeSubtract(self.values, other.values))
        case (false, true):
            return SlotContainer(values: self.values.filter { !other.contains($0) })
        case (true, false):
            var words = self.words
            var count = self.count
            for value in other.values {
                let bit: UInt64 = 1 << UInt64(value & 63)
                let index = Int(value >> 6)
                if words[index] & bit != 0 {
                    words[index] &= ~bit
                    count -= 1
                }
            }
            return SlotContainer(words: words, count: count)
        case (true, true):
            return Self.combine(self.words, other.words) { $0 & ~$1 }
        }
    }

    private func settingBits(of values: [UInt16]) -> SlotContainer {
        var words = self.words
        var count = self.count
        for value in values {
            let bit: UInt64 = 1 << UInt64(value & 63)
            let index = Int(value >> 6)
            if words[index] & bit == 0 {
                words[index] |= bit
                count += 1
            }
        }
        return SlotContainer(words: words, count: count)
    }

    private static func combine(
        _ lhs: [UInt64],
        _ rhs: [UInt64],
        _ operation: (UInt64, UInt64) -> UInt64
    ) -> SlotContainer {
        var count = 0
        let words = [UInt64](unsafeUninitializedCapacity: Self.wordCount) { output, initialized in
            lhs.withUnsafeBufferPointer { lhs in
                rhs.withUnsafeBufferPointer { rhs in
                    for index in 0..<Self.wordCount {
                        let word = operation(lhs[index], rhs[index])
                        output[index] = word
                        count &+= word.nonzeroBitCount
                    }
                }
            }
            initialized = Self.wordCount
        }
        return SlotContainer(words: words, count: count)
    }

    // MARK: - Sorted-array helpers

    /// Binary search: whether `value` is in the sorted `values`, and where it is or would go.
    @inline(__always)
    private static func search(_ values: [UInt16], _ value: UInt16) -> (found: Bool, index: Int) {
        var low = 0
        var high = values.count
        while low < high {
            let middle = (low + high) >> 1
            let member = values[middle]
            if member < value {
                low = middle + 1
            } else if member > value {
                high = middle
            } else {
                return (true, middle)
            }
        }
        return (false, low)
    }

    private static func members(ofWords words: [UInt64], count: Int) -> [UInt16] {
        var values = [UInt16]()
        values.reserveCapacity(count)
        for (index, word) in words.enumerated() {
            var word = word
            while word != 0 {
                values.append(UInt16(index << 6 | word.trailingZeroBitCount))
                word &= word &- 1
            }
        }
        return values
    }

    private static func mergeIntersect(_ lhs: [UInt16], _ rhs: [UInt16]) -> [UInt16] {
        var result = [UInt16]()
        result.reserveCapacity(min(lhs.count, rhs.count))
        var i = 0
        var j = 0
        while i < lhs.count && j < rhs.count {
            let a = lhs[i]
            let b = rhs[j]
            if a < b {
                i += 1
            } else if a > b {
                j += 1
            } else {
                result.append(a)
                i += 1
                j += 1
            }
        }
        return result
    }

    private static func mergeUnion(_ lhs: [UInt16], _ rhs: [UInt16]) -> [UInt16] {
        var result = [UInt16]()
        result.reserveCapacity(lhs.count + rhs.count)
        var i = 0
        var j = 0
        while i < lhs.count && j < rhs.count {
            let a = lhs[i]
            let b = rhs[j]
            if a < b {
                result.append(a)
                i += 1
            } else if a > b {
                result.append(b)
                j += 1
            } else {
                result.append(a)
                i += 1
                j += 1
            }
        }
        result.append(contentsOf: lhs[i...])
        result.append(contentsOf: rhs[j...])
        return result
    }

    private static func mergeSubtract(_ lhs: [UInt16], _ rhs: [UInt16]) -> [UInt16] {
        var result = [UInt16]()
        result.reserveCapacity(lhs.count)
        var i = 0
        var j = 0
        while i < lhs.count {
            let a = lhs[i]
            while j < rhs.count && rhs[j] < a { j += 1 }
            if j == rhs.count || rhs[j] != a {
                result.append(a)
            }
            i += 1
        }
        return result
    }

    // MARK: - Invariants

    /// The representation is canonical: arrays sorted, strictly increasing and at most 4096 long;
    /// bitmaps 1024 words with more than 4096 bits set; `count` exact.
    func checkInvariants() -> Bool {
        if self.isBitmap {
            guard self.values.isEmpty, self.words.count == Self.wordCount else { return false }
            let bits = self.words.reduce(0) { $0 + $1.nonzeroBitCount }
            return bits == self.count && self.count > Self.arrayLimit
        }
        guard self.values.count == self.count, self.count <= Self.arrayLimit else { return false }
        return zip(self.values, self.values.dropFirst()).allSatisfy { $0 < $1 }
    }
}
