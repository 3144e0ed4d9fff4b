internal import DequeModule

/// The consumers attached to one project, and which installations' deliveries go to whom.
///
/// A device consumer owns its slots (their mailboxes carry a flag, so the send path needs no
/// lookup); every other slot's deliveries go to the workers of its platform, which take turns
/// pulling slots from the platform's ready queue. The queues are kept only while a platform has
/// workers. Not thread-safe: the engine serialises access per project.
///
/// What a consumer holds is kept where the deliveries are: each mailbox node it holds is in
/// flight with the consumer's holder number beside it (`MailboxTable.hold`), so an
/// acknowledgement checks the node it finds anyway. The consumer keeps a count (its credit) and
/// the list of what it was handed, in order, for when it detaches or loses an installation; the
/// list drops what is no longer held from its front as acknowledgements come (in order, mostly),
/// and all at once when it grows past twice what is held.
struct ConsumerTable {
    struct Consumer {
        let id: UInt64
        /// Its number in the mailboxes' holders (reused once it has detached).
        let holder: UInt32
        /// The platform of a worker; `nil` for a device consumer.
        let platform: Platform?
        /// A device consumer's slots.
        var slots: Set<UInt32>
        /// The most unacknowledged deliveries it may hold.
        var credit: Int
        /// The deliveries it holds unacknowledged: the nodes in flight under its holder number,
        /// and its holding's orphans.
        var held = 0
        let sink: DeliverySink

        var hasRoom: Bool { self.held < self.credit }
    }

    /// A delivery as it was handed out: its id and the mailbox node it was.
    struct HandedOut {
        let id: DeliveryID
        let node: UInt32
    }

    /// What the consumer with one holder number was handed, and holds orphaned.
    struct Holding {
        /// What it was handed, oldest first; a superset of the nodes it holds.
        var handedOut: Deque<HandedOut> = []
        /// Deliveries it holds that left their mailbox meanwhile (collapsed, expired, dropped):
        /// they count against its credit until it acknowledges them, as the protocol says.
        var orphans: Set<DeliveryID> = []
    }

    /// `handedOut` is compacted when it passes twice what is held and this.
    static let handedOutSlack = 8

    var byID: [UInt64: Consumer] = [:]
    /// The consumer id of each holder number (0: free; consumer ids start at 1).
    private(set) var consumerOfHolder: [UInt64] = []
    /// The holding of each holder number (kept apart from `byID` so that it is changed in place
    /// while the mailboxes are read).
    var holdings: [Holding] = []
    private var freeHolders: [UInt32] = []
    var deviceConsumer: [UInt32: UInt64] = [:]
    var workers = PerPlatform<[UInt64]> { _ in [] }
    /// Slots of each platform with deliveries no consumer holds (flagged `isQueued(on:)` in the
    /// mailbox). A slot freed while queued stays until popped; the worker that pops it skips it.
    var readyQueue = PerPlatform<Deque<UInt32>> { _ in Deque() }
    /// Where the next turn among a platform's workers starts.
    var nextWorker = PerPlatform<Int> { _ in 0 }
    /// Consumers that may have room for waiting deliveries (filled after each change).
    var needsFill: Set<UInt64> = []
    var nextID: UInt64 = 1

    /// Where consumer `id` is in `byID`: a fill looks it up once and hands out by position (the
    /// position stays valid while no consumer is attached or detached).
    typealias Position = Dictionary<UInt64, Consumer>.Index

    func position(of id: UInt64) -> Position? {
        self.byID.index(forKey: id)
    }

    /// Adds a consumer under a holder number of its own.
    mutating func add(id: UInt64, platform: Platform?, slots: Set<UInt32>, credit: Int, sink: DeliverySink) {
        let holder: UInt32
        if let free = self.freeHolders.popLast() {
            holder = free
            self.consumerOfHolder[Int(holder)] = id
        } else {
            holder = UInt32(self.consumerOfHolder.count)
            self.consumerOfHolder.append(id)
            self.holdings.append(Holding())
        }
        self.byID[id] = Consumer(id: id, holder: holder, platform: platform, slots: slots, credit: credit, sink: sink)
    }

    /// Removes consumer `id` with its holding; its holder number is free for the next one, so
    /// the caller must put back every node it holds.
    mutating func remove(_ id: UInt64) -> (consumer: Consumer, holding: Holding)? {
        guard let consumer = self.byID.removeValue(forKey: id) else { return nil }
        self.needsFill.remove(id)
        let holding = self.holdings[Int(consumer.holder)]
        self.holdings[Int(consumer.holder)] = Holding()
        self.consumerOfHolder[Int(consumer.holder)] = 0
        self.freeHolders.append(consumer.holder)
        return (consumer, holding)
    }

    /// Notes that the consumer at `position` holds `delivery`, mailbox node `node`; returns its
    /// id, holder number and the room it has left (not its sink: returning that retained and
    /// released it for every delivery).
    mutating func hold(_ delivery: DeliveryID, node: UInt32, at position: Position) -> (consumer: UInt64, holder: UInt32, room: Int) {
        let held = Self.hold(by: &self.byID.values[position])
        self.holdings[Int(held.holder)].handedOut.append(HandedOut(id: delivery, node: node))
        return held
    }

    // In place, as `hasRoom`.
    private static func hold(by consumer: inout Consumer) -> (consumer: UInt64, holder: UInt32, room: Int) {
        consumer.held += 1
        return (consumer.id, consumer.holder, consumer.credit - consumer.held)
    }

    /// The holder number of the consumer at `position` and how many deliveries it holds.
    mutating func holding(at position: Position) -> (holder: UInt32, held: Int) {
        Self.holding(of: &self.byID.values[position])
    }

    private static func holding(of consumer: inout Consumer) -> (holder: UInt32, held: Int) {
        (consumer.holder, consumer.held)
    }

    /// Notes that the consumer at `position` holds `count` fewer deliveries.
    mutating func unhold(_ count: Int, at position: Position) {
        Self.unhold(count, by: &self.byID.values[position])
    }

    private static func unhold(_ count: Int, by consumer: inout Consumer) {
        consumer.held -= count
    }

    /// Keeps `delivery`, which left its mailbox while the consumer with `holder` held it, counted
    /// against that consumer's credit until it acknowledges it.
    mutating func orphan(_ delivery: DeliveryID, heldBy holder: UInt32) {
        self.holdings[Int(holder)].orphans.insert(delivery)
    }

    /// Forgets `delivery` if it is one of the orphans of `holder`; true if it was.
    mutating func forgetOrphan(_ delivery: DeliveryID, heldBy holder: UInt32) -> Bool {
        !self.holdings[Int(holder)].orphans.isEmpty && self.holdings[Int(holder)].orphans.remove(delivery) != nil
    }

    /// The sink of the consumer at `position`, read in place (reading `byID.values[position]`
    /// copied the consumer).
    mutating func sink(at position: Position) -> DeliverySink {
        Self.sink(of: &self.byID.values[position])
    }

    private static func sink(of consumer: inout Consumer) -> DeliverySink {
        consumer.sink
    }

    /// Whether consumer `id` may be handed another delivery, read in place (through `_modify`):
    /// binding `byID[id]!`, or reading `byID.values[index]`, copied the consumer (its sink, slots
    /// and held set, retained and released) for every delivery handed out.
    mutating func hasRoom(_ id: UInt64) -> Bool {
        guard let index = self.byID.index(forKey: id) else { return false }
        return self.hasRoom(at: index)
    }

    mutating func hasRoom(at position: Position) -> Bool {
        Self.hasRoom(&self.byID.values[position])
    }

    private static func hasRoom(_ consumer: inout Consumer) -> Bool {
        consumer.hasRoom
    }

    /// A worker of `platform` with room, taking turns; `nil` when all are full (or there are none).
    mutating func workerWithRoom(for platform: Platform) -> UInt64? {
        let workers = self.workers[platform]
        guard !workers.isEmpty else { return nil }
        for offset in 0..<workers.count {
            let id = workers[(self.nextWorker[platform] + offset) % workers.count]
            if self.hasRoom(id) {
                self.nextWorker[platform] = (self.nextWorker[platform] + offset + 1) % workers.count
                return id
            }
        }
        return nil
    }
}
