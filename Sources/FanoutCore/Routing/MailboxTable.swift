internal import CFanoutIntrinsics

/// Every installation's mailbox, as singly linked lists of 8-byte nodes in one pool.
///
/// The pool hands nodes out in aligned blocks of four (half a cache line): a mailbox's second and
/// later nodes come from blocks of its own, so that a fill or an acknowledgement walking one
/// mailbox reads one line for several of its nodes (nodes allocated one by one lay a send's
/// audience apart, a cache miss each). First nodes share blocks, packed as a send enqueues its
/// audience, so a fan-out that leaves one delivery per installation takes no more room than before.
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
        /// The free nodes of the block holding `last`, a bit each, while that block is the
        /// mailbox's own (`ownsLastBlock`): where the next node goes, known without reading the
        /// block (a load the send path would wait for; the link it writes into `last` it need not).
        var lastBlockRoom: UInt8 = 0

        static let hasDeviceConsumer: UInt8 = 2
        static let hasMarker: UInt8 = 4
        /// The block holding `last` takes only this mailbox's nodes (see `lastBlockRoom`).
        static let ownsLastBlock: UInt8 = 8
        /// In the ready queue of `platform`'s workers. One flag per platform: a slot freed while
        /// queued and taken by an installation of another platform stays in its old platform's
        /// queue until a worker of that platform pops it, and must be able to join the new one's.
        static func isQueued(on platform: Platform) -> UInt8 { 16 << (platform.code - 1) }
        /// Every platform's `isQueued`.
        static let isQueuedOnAnyPlatform: UInt8 = 16 | 32 | 64

        var isEmpty: Bool { self.first == MailboxTable.none }
    }

    private(set) var heads: [Head] = []
    private var nodes: [Node] = []
    /// Nodes in use: the pending deliveries and markers of every mailbox.
    private(set) var count = 0

    /// Nodes per block; a block's nodes are `block * blockSize ..< (block + 1) * blockSize`.
    static let blockSize = 4
    /// A free node's `next`: no node index gets this high (a pool of 32 GiB).
    private static let freeMark = UInt32.max - 1
    /// Blocks with no node in use (but `firstNodes`).
    private var freeBlocks: [UInt32] = []
    /// The block first nodes are taken from (kept while empty).
    private var firstNodes = MailboxTable.none

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
        let last = self.heads[Int(slot)].last
        let index = self.allocateNode(for: slot, after: last)
        self.nodes[Int(index)] = node
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
        self.noteRemoval(index, after: previous, in: slot)
        if self.heads[Int(slot)].firstWaiting == index { self.heads[Int(slot)].firstWaiting = next }
        self.release(index)
        self.count -= 1
        if self.count == 0 {
            // Give the pool back once everything is gone (a big fan-out leaves a big pool).
            self.nodes = []
            self.freeBlocks = []
            self.firstNodes = Self.none
        }
    }

    // MARK: - Blocks

    /// A free node for `slot`'s mailbox, whose last node is `last`: in the block of `last` if it
    /// is the mailbox's own and has room, else in a new block of its own; a first node (`last` is
    /// `none`) in the block of first nodes.
    private mutating func allocateNode(for slot: UInt32, after last: UInt32) -> UInt32 {
        let blockSize = UInt32(Self.blockSize)
        if last == Self.none {
            self.heads[Int(slot)].flags &= ~Head.ownsLastBlock
            self.heads[Int(slot)].lastBlockRoom = 0
            if self.firstNodes != Self.none {
                let first = self.firstNodes * blockSize
                if let free = (first..<(first + blockSize)).first(where: { self.nodes[Int($0)].next == Self.freeMark }) { return free }
            }
            self.firstNodes = self.takeBlock()
            return self.firstNodes * blockSize
        }
        let room = self.heads[Int(slot)].lastBlockRoom
        if room != 0 {
            self.heads[Int(slot)].lastBlockRoom = room & (room - 1)
            return last - last % blockSize + UInt32(room.trailingZeroBitCount)
        }
        self.heads[Int(slot)].flags |= Head.ownsLastBlock
        self.heads[Int(slot)].lastBlockRoom = UInt8(1 << Self.blockSize - 2)  // all but the node taken now
        return self.takeBlock() * blockSize
    }

    /// Keeps `slot`'s head (`last`, `lastBlockRoom`) true as node `index`, after `previous`,
    /// leaves its mailbox.
    private mutating func noteRemoval(_ index: UInt32, after previous: UInt32, in slot: UInt32) {
        let blockSize = UInt32(Self.blockSize)
        let head = self.heads[Int(slot)]
        let owns = head.flags & Head.ownsLastBlock != 0
        let inLastBlock = index / blockSize == head.last / blockSize
        if head.last == index {
            self.heads[Int(slot)].last = previous
            guard owns, previous != Self.none, previous / blockSize == index / blockSize else {
                // The new last node's block may be shared, or full: take a new one next time.
                self.heads[Int(slot)].flags &= ~Head.ownsLastBlock
                self.heads[Int(slot)].lastBlockRoom = 0
                return
            }
        }
        if owns && inLastBlock {
            self.heads[Int(slot)].lastBlockRoom |= 1 << (index % blockSize)
        }
    }

    /// An empty block, from the free ones or new at the end of the pool.
    private mutating func takeBlock() -> UInt32 {
        if let free = self.freeBlocks.popLast() { return free }
        let block = UInt32(self.nodes.count / Self.blockSize)
        var free = Node(entry: 0, isMarker: false, isInFlight: false)
        free.next = Self.freeMark
        self.nodes.append(contentsOf: repeatElement(free, count: Self.blockSize))
        return block
    }

    /// Marks node `index` free; its block goes back once it is empty (but the block of first
    /// nodes). An emptied block holds no mailbox's last node, so no allocation looks at it.
    private mutating func release(_ index: UInt32) {
        self.nodes[Int(index)].next = Self.freeMark
        let first = Int(index) - Int(index) % Self.blockSize
        let block = UInt32(first / Self.blockSize)
        if block != self.firstNodes, self.nodes[first..<(first + Self.blockSize)].allSatisfy({ $0.next == Self.freeMark }) {
            self.freeBlocks.append(block)
        }
    }

    /// The approximate heap bytes of the table (heads and node pool, by capacity).
    var allocatedBytes: Int {
        self.heads.capacity * MemoryLayout<Head>.stride + self.nodes.capacity * MemoryLayout<Node>.stride
            + self.freeBlocks.capacity * MemoryLayout<UInt32>.stride
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
        precondition(self.nodes.count { $0.next != Self.freeMark } == self.count, "mailbox nodes not marked free != count")
        for head in self.heads where head.lastBlockRoom != 0 {
            precondition(head.flags & Head.ownsLastBlock != 0, "a mailbox keeps room in a block not its own")
            let first = Int(head.last) - Int(head.last) % Self.blockSize
            for offset in 0..<Self.blockSize where head.lastBlockRoom & (1 << offset) != 0 {
                precondition(self.nodes[first + offset].next == Self.freeMark, "a mailbox's room names a node in use")
            }
        }
    }
    #endif
}
