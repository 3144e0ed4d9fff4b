internal import CFanoutIntrinsics

/// The reverse map of the topic index: for every slot, the ids of its topics, unordered.
///
/// A per-slot `[UInt32]` costs a 32-byte header, allocator rounding and doubling slack (about 8
/// bytes per subscription at 20 topics); here every list is a chain of 32-byte blocks of 7 ids plus
/// a link, pooled in fixed pages of 65536 blocks (2 MiB), so a subscription costs about 4.6 bytes
/// and a slot 6 bytes (head and count). The head block is the only partly filled one: appends
/// write into it, and a removal moves the last id of the head into the hole.
package struct SlotTopicLists {
    package init() {}

    private static let wordsPerBlock = 8
    private static let idsPerBlock = 7
    private static let blocksPerPage = 1 << 16
    private static let none = UInt32.max

    /// Blocks, `blocksPerPage` per page; block `b` is words `8 * (b % blocksPerPage) ..< + 8` of
    /// page `b / blocksPerPage`; word 7 links to the next block of the same list (or a free block).
    private var pages: [[UInt32]] = []
    private var blockCount = 0
    private var freeBlock = Self.none
    /// The first block of each slot's list (`none` when empty) and its length.
    private var heads: [UInt32] = []
    private var counts: [UInt16] = []

    package func count(of slot: UInt32) -> Int {
        Int(slot) < self.counts.count ? Int(self.counts[Int(slot)]) : 0
    }

    /// Calls `body` with each id of `slot`'s list.
    package func forEach(of slot: UInt32, _ body: (UInt32) -> Void) {
        var remaining = self.count(of: slot)
        guard remaining > 0 else { return }
        var block = self.heads[Int(slot)]
        // The head holds `count % 7` ids (7 when that is 0); the rest are full.
        var inBlock = remaining % Self.idsPerBlock == 0 ? Self.idsPerBlock : remaining % Self.idsPerBlock
        while remaining > 0 {
            for index in 0..<inBlock { body(self[block, index]) }
            remaining -= inBlock
            inBlock = Self.idsPerBlock
            block = self[block, Self.idsPerBlock]
        }
    }

    package func ids(of slot: UInt32) -> [UInt32] {
        var ids: [UInt32] = []
        ids.reserveCapacity(self.count(of: slot))
        self.forEach(of: slot) { ids.append($0) }
        return ids
    }

    /// Asks the CPU for `slot`'s head and count, without waiting (a batch of subscriptions reads
    /// them for slots far apart).
    package func prefetchEntry(of slot: UInt32) {
        guard Int(slot) < self.heads.count else { return }
        self.heads.withUnsafeBufferPointer { fanout_prefetch($0.baseAddress! + Int(slot)) }
        self.counts.withUnsafeBufferPointer { fanout_prefetch($0.baseAddress! + Int(slot)) }
    }

    /// Asks the CPU for `slot`'s head block, without waiting; reads its head (ask for that first).
    /// Mutating: the page is reached as an append that follows writes it, in place; read through
    /// a non-mutating access, it was retained and released on each call (4% of a batch
    /// SUBSCRIBE's samples, under the project lock).
    package mutating func prefetchHeadBlock(of slot: UInt32) {
        guard Int(slot) < self.heads.count, self.heads[Int(slot)] != Self.none else { return }
        let block = Int(self.heads[Int(slot)])
        self.pages[block / Self.blocksPerPage].withUnsafeMutableBufferPointer {
            fanout_prefetch($0.baseAddress! + block % Self.blocksPerPage * Self.wordsPerBlock)
        }
    }

    /// Adds `id` to `slot`'s list. The caller ensures it is not there yet and the list stays below 65536.
    package mutating func append(_ id: UInt32, to slot: UInt32) {
        if Int(slot) >= self.heads.count {
            let missing = Int(slot) + 1 - self.heads.count
            self.heads.append(contentsOf: repeatElement(Self.none, count: missing))
            self.counts.append(contentsOf: repeatElement(0, count: missing))
        }
        let count = Int(self.counts[Int(slot)])
        if count % Self.idsPerBlock == 0 {
            let block = self.allocateBlock()
            self[block, Self.idsPerBlock] = self.heads[Int(slot)]
            self.heads[Int(slot)] = block
        }
        self[self.heads[Int(slot)], count % Self.idsPerBlock] = id
        self.counts[Int(slot)] += 1
    }

    /// Adds `id` to the list of each slot of `slots`, none of which holds it yet, asking for each
    /// slot's entry and head block ahead.
    /// - Returns: the first slot whose list is full (65535 ids), with `id` added to none from it
    ///   on; nil when it was added to all.
    package mutating func append(_ id: UInt32, toEach slots: [UInt32]) -> UInt32? {
        for (position, slot) in slots.enumerated() {
            if position + 16 < slots.count { self.prefetchEntry(of: slots[position + 16]) }
            if position + 8 < slots.count { self.prefetchHeadBlock(of: slots[position + 8]) }
            guard self.count(of: slot) < Int(UInt16.max) else { return slot }
            self.append(id, to: slot)
        }
        return nil
    }

    /// Removes `id` from `slot`'s list; returns false when it was not there.
    package mutating func remove(_ id: UInt32, from slot: UInt32) -> Bool {
        let count = self.count(of: slot)
        guard count > 0 else { return false }
        let head = self.heads[Int(slot)]
        let lastIndex = (count - 1) % Self.idsPerBlock
        // Find the block and index holding `id`.
        var remaining = count
        var block = head
        var inBlock = lastIndex + 1
        while remaining > 0 {
            for index in 0..<inBlock where self[block, index] == id {
                self[block, index] = self[head, lastIndex]
                self.counts[Int(slot)] -= 1
                if lastIndex == 0 {
                    self.heads[Int(slot)] = self[head, Self.idsPerBlock]
                    self.releaseBlock(head)
                }
                return true
            }
            remaining -= inBlock
            inBlock = Self.idsPerBlock
            block = self[block, Self.idsPerBlock]
        }
        return false
    }

    /// Empties `slot`'s list and returns what it held.
    package mutating func removeAll(of slot: UInt32) -> [UInt32] {
        let ids = self.ids(of: slot)
        guard !ids.isEmpty else { return ids }
        var block = self.heads[Int(slot)]
        while block != Self.none {
            let next = self[block, Self.idsPerBlock]
            self.releaseBlock(block)
            block = next
        }
        self.heads[Int(slot)] = Self.none
        self.counts[Int(slot)] = 0
        return ids
    }

    // MARK: - Blocks

    private subscript(block: UInt32, word: Int) -> UInt32 {
        get {
            self.pages[Int(block) / Self.blocksPerPage][Int(block) % Self.blocksPerPage * Self.wordsPerBlock + word]
        }
        set {
            self.pages[Int(block) / Self.blocksPerPage][Int(block) % Self.blocksPerPage * Self.wordsPerBlock + word] = newValue
        }
    }

    private mutating func allocateBlock() -> UInt32 {
        if self.freeBlock != Self.none {
            let block = self.freeBlock
            self.freeBlock = self[block, Self.idsPerBlock]
            return block
        }
        if self.blockCount == self.pages.count * Self.blocksPerPage {
            var page: [UInt32] = []
            page.reserveCapacity(Self.blocksPerPage * Self.wordsPerBlock)
            page.append(contentsOf: repeatElement(0, count: Self.blocksPerPage * Self.wordsPerBlock))
            self.pages.append(page)
        }
        defer { self.blockCount += 1 }
        return UInt32(self.blockCount)
    }

    private mutating func releaseBlock(_ block: UInt32) {
        self[block, Self.idsPerBlock] = self.freeBlock
        self.freeBlock = block
    }
}
