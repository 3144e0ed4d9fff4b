internal import CFanoutIntrinsics

/// Every installation's mailbox, as singly linked lists of 8-byte nodes in one pool.
///
/// A node names a `MessageEntry` (30 bits) with two flags (held by a consumer; "deleted messages"
/// marker) and links to the next node; the payload stays in the shared entry. A mailbox head
/// (16 bytes, indexed by slot) holds the first and last node, the first node that may be waiting
/// (every node before it is held), the count that the 100-pending rule watches, and flags.
/// Mailboxes keep enqueue order, which is message sequence order. They are short (at most 100
/// counted deliveries, 4 collapse keys and a marker), so removing from the middle walks the list;
/// handing out starts at `firstWaiting`, past what consumers hold. Not thread-safe: the engine
/// serialises access per project.
struct MailboxTable {
    static let none = UInt32.max

    struct Node {
        fileprivate var word: UInt32
        fileprivate(set) var next: UInt32

        private static let inFlightBit: UInt32 = 1 << 31
        private static let markerBit: UInt32 = 1 << 30
        /// The most message entries a node can name.
        static let entryLimit: UInt32 = 1 << 30

        init(entry: UInt32, isMarker: Bool, isInFlight: Bool) {
            self.word = entry | (isMarker ? Self.markerBit : 0) | (isInFlight ? Self.inFlightBit : 0)
            self.next = MailboxTable.none
        }

        var entry: UInt32 { self.word & (Self.markerBit - 1) }
        var isMarker: Bool { self.word & Self.markerBit != 0 }
        var isInFlight: Bool {
            get { self.word & Self.inFlightBit != 0 }
            set { self.word = newValue ? self.word | Self.inFlightBit : self.word & ~Self.inFlightBit }
        }
    }

    struct Head {
        var first = MailboxTable.none
        var last = MailboxTable.none
        /// A node such that every node before it is held by a consumer (`none`: every node is);
        /// hand-outs start here instead of walking past the held ones each time.
        var firstWaiting = MailboxTable.none
        /// Deliveries counted by the 100-pending rule (neither collapsible nor TTL 0).
        var counted: UInt8 = 0
        var flags: UInt8 = 0

        static let isQueued: UInt8 = 1
        static let hasDeviceConsumer: UInt8 = 2
        static let hasMarker: UInt8 = 4

        var isEmpty: Bool { self.first == MailboxTable.none }
    }

    private(set) var heads: [Head] = []
    private var nodes: [Node] = []
    private var freeNodes = MailboxTable.none
    /// Nodes in use: the pending deliveries and markers of every mailbox.
    private(set) var count = 0

    // MARK: - Heads

    func head(_ slot: UInt32) -> Head {
        Int(slot) < self.heads.count ? self.heads[Int(slot)] : Head()
    }

    func hasFlag(_ flag: UInt8, _ slot: UInt32) -> Bool {
        Int(slot) < self.heads.count && self.heads[Int(slot)].flags & flag != 0
    }

    mutating func setFlag(_ flag: UInt8, _ value: Bool, _ slot: UInt32) {
        self.ensureHead(slot)
        if value {
            self.heads[Int(slot)].flags |= flag
        } else {
            self.heads[Int(slot)].flags &= ~flag
        }
    }

    mutating func adjustCounted(_ slot: UInt32, by delta: Int) {
        self.heads[Int(slot)].counted = UInt8(Int(self.heads[Int(slot)].counted) + delta)
    }

    /// Makes sure `slot` has a head, growing the table geometrically.
    private mutating func ensureHead(_ slot: UInt32) {
        guard Int(slot) >= self.heads.count else { return }
        let capacity = max(Int(slot) + 1, self.heads.count * 2, 1024)
        self.heads.reserveCapacity(capacity)
        self.heads.append(contentsOf: repeatElement(Head(), count: capacity - self.heads.count))
    }

    // MARK: - Nodes

    func node(_ index: UInt32) -> Node { self.nodes[Int(index)] }

    /// Marks node `index` of `slot`'s mailbox held by a consumer, or waiting again.
    mutating func setInFlight(_ index: UInt32, _ value: Bool, in slot: UInt32) {
        self.nodes[Int(index)].isInFlight = value
        if value {
            if self.heads[Int(slot)].firstWaiting == index { self.heads[Int(slot)].firstWaiting = self.nodes[Int(index)].next }
        } else {
            // Waiting again (its consumer left), possibly before `firstWaiting`: start over.
            self.heads[Int(slot)].firstWaiting = self.heads[Int(slot)].first
        }
    }

    /// Appends a node at the end of `slot`'s mailbox; returns its index.
    @discardableResult
    mutating func append(_ node: Node, to slot: UInt32) -> UInt32 {
        self.ensureHead(slot)
        let index: UInt32
        if self.freeNodes != Self.none {
            index = self.freeNodes
            self.freeNodes = self.nodes[Int(index)].next
            self.nodes[Int(index)] = node
        } else {
            index = UInt32(self.nodes.count)
            self.nodes.append(node)
        }
        let last = self.heads[Int(slot)].last
        if last == Self.none {
            self.heads[Int(slot)].first = index
        } else {
            self.nodes[Int(last)].next = index
        }
        self.heads[Int(slot)].last = index
        if self.heads[Int(slot)].firstWaiting == Self.none && !node.isInFlight { self.heads[Int(slot)].firstWaiting = index }
        self.count += 1
        return index
    }

    /// Calls `body` with each node of `slot`'s mailbox in order until it returns false.
    func forEach(in slot: UInt32, _ body: (UInt32, Node) throws -> Bool) rethrows {
        var index = self.head(slot).first
        while index != Self.none {
            let node = self.nodes[Int(index)]
            guard try body(index, node) else { return }
            index = node.next
        }
    }

    /// The first node of `slot`'s mailbox, or `none`.
    func first(in slot: UInt32) -> UInt32 { self.head(slot).first }

    /// Where a hand-out from `slot`'s mailbox starts: every node before it is held (`none`: all are).
    func firstWaiting(in slot: UInt32) -> UInt32 { self.head(slot).firstWaiting }

    /// Prefetches the heads of `slots`' mailboxes, then their first nodes: a batch about to walk
    /// many mailboxes (an acknowledgement's) waits for those misses side by side instead of one
    /// after another.
    func prefetchFirstNodes(of slots: some Collection<UInt32>) {
        self.heads.withUnsafeBufferPointer { heads in
            guard let firstHead = heads.baseAddress else { return }
            for slot in slots where Int(slot) < heads.count { fanout_prefetch(firstHead + Int(slot)) }
            self.nodes.withUnsafeBufferPointer { nodes in
                guard let firstNode = nodes.baseAddress else { return }
                for slot in slots where Int(slot) < heads.count && heads[Int(slot)].first != Self.none {
                    fanout_prefetch(firstNode + Int(heads[Int(slot)].first))
                }
            }
        }
    }

    /// The first node of `slot`'s mailbox that satisfies `predicate`, with the node before it
    /// (`none` when it is the first), ready for `remove(_:after:in:)`.
    func first(in slot: UInt32, where predicate: (Node) -> Bool) -> (index: UInt32, previous: UInt32)? {
        var previous = Self.none
        var index = self.head(slot).first
        while index != Self.none {
            let node = self.nodes[Int(index)]
            if predicate(node) { return (index, previous) }
            previous = index
            index = node.next
        }
        return nil
    }

    /// Unlinks node `index` from `slot`'s mailbox, where `previous` is the node before it (`none`
    /// for the first). Callers walk with `first(in:)` and `node(_:).next`, keeping `previous`.
    mutating func remove(_ index: UInt32, after previous: UInt32, in slot: UInt32) {
        let next = self.nodes[Int(index)].next
        if previous == Self.none {
            self.heads[Int(slot)].first = next
        } else {
            self.nodes[Int(previous)].next = next
        }
        if self.heads[Int(slot)].last == index { self.heads[Int(slot)].last = previous }
        if self.heads[Int(slot)].firstWaiting == index { self.heads[Int(slot)].firstWaiting = next }
        self.nodes[Int(index)].next = self.freeNodes
        self.freeNodes = index
        self.count -= 1
        if self.count == 0 {
            // Give the pool back once everything is gone (a big fan-out leaves a big pool).
            self.nodes = []
            self.freeNodes = Self.none
        }
    }

    /// The approximate heap bytes of the table (heads and node pool, by capacity).
    var allocatedBytes: Int {
        self.heads.capacity * MemoryLayout<Head>.stride + self.nodes.capacity * MemoryLayout<Node>.stride
    }

    #if FANOUT_INTERNAL_CHECKS
    /// The number of nodes reachable from the heads equals `count`, every list ends at `last`,
    /// and every node before a list's `firstWaiting` is held (which is in the list, or `none`).
    func checkInvariants() {
        var reachable = 0
        for head in self.heads {
            var index = head.first
            var last = Self.none
            var isBeforeFirstWaiting = true
            while index != Self.none {
                reachable += 1
                last = index
                if index == head.firstWaiting { isBeforeFirstWaiting = false }
                precondition(!isBeforeFirstWaiting || self.nodes[Int(index)].isInFlight, "a waiting node is before its mailbox's firstWaiting")
                index = self.nodes[Int(index)].next
            }
            precondition(head.firstWaiting == Self.none || !isBeforeFirstWaiting, "a mailbox's firstWaiting is not in it")
            precondition(last == head.last, "a mailbox's last node is stale")
        }
        precondition(reachable == self.count, "mailbox node count \(self.count) != reachable \(reachable)")
    }
    #endif
}
