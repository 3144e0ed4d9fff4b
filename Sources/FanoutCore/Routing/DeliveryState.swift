/// Everything one project holds for delivery: the messages with pending deliveries, every
/// installation's mailbox, the attached consumers, the message sequence and the counters. The
/// rules that use it live in `ProjectState+Deliveries.swift`, which also sees the registry.
struct DeliveryState {
    /// Messages by entry index (`nil` where free); mailbox nodes name these indices.
    var entries: [MessageEntry?] = []
    /// Each entry's `MessageFacts`, by the same index (stale where the entry is free).
    var facts: [MessageFacts] = []
    var freeEntries: [UInt32] = []
    var mailboxes = MailboxTable()
    var consumers = ConsumerTable()
    /// The sequence number of the next message (ids start at 1).
    var nextSequence: UInt64 = 1
    /// Counters since the engine opened (`pending`, `messages` and `consumers` are filled on read).
    var counters = DeliveryStatistics()
    /// Deliveries given to consumers by the change being made, for the engine to push once the
    /// change is durable (`Engine.withProject` takes them before it releases the project lock).
    var handOuts: [HandOut] = []
    /// Whether the change being made enqueued deliveries (a send): its hand-outs may include
    /// them, so they wait for its own log records too. Any other change hands out deliveries of
    /// earlier changes, and its hand-outs wait only for the records before its own: an
    /// acknowledgement's refill does not wait for the acknowledgement's sync.
    var handsOutNewDeliveries = false
    /// How many log records the change being made appended (set as it appends them).
    var recordsOfThisChange = 0

    var statistics: DeliveryStatistics {
        var statistics = self.counters
        statistics.pending = self.mailboxes.count
        statistics.messages = self.entries.count - self.freeEntries.count
        statistics.consumers = self.consumers.byID.count
        return statistics
    }

    /// Queues a delivery handed to the consumer behind `sink`: a fill hands one consumer its
    /// deliveries one after another, so they join that consumer's batch (sized for its `room`).
    /// The delivery is moved in (`consuming`), not copied: a copy retained its token and message
    /// and the caller's released them.
    mutating func queueHandOut(_ delivery: consuming Delivery, to sink: DeliverySink, room: Int) {
        if let last = self.handOuts.indices.last, self.handOuts[last].sink === sink {
            self.handOuts[last].deliveries.append(delivery)
            return
        }
        var deliveries: [Delivery] = []
        deliveries.reserveCapacity(room + 1)
        deliveries.append(delivery)
        self.handOuts.append(HandOut(sink: sink, deliveries: deliveries))
    }

    /// Stores a message entry with no references yet; returns its index. Its deliveries are then
    /// counted with `retain`, which drops the entry if there are none.
    mutating func add(_ entry: MessageEntry) -> UInt32 {
        if let index = self.freeEntries.popLast() {
            self.entries[Int(index)] = entry
            self.facts[Int(index)] = MessageFacts(entry)
            return index
        }
        self.entries.append(entry)
        self.facts.append(MessageFacts(entry))
        return UInt32(self.entries.count - 1)
    }

    /// Adds `count` references to entry `index` (the deliveries just enqueued); an entry nothing
    /// references goes at once.
    mutating func retain(_ index: UInt32, count: Int) {
        self.adjustReferences(index, by: count)
    }

    /// Drops one reference to entry `index`; the entry goes with its last one.
    mutating func release(_ index: UInt32) {
        self.adjustReferences(index, by: -1)
    }

    private mutating func adjustReferences(_ index: UInt32, by delta: Int) {
        self.entries[Int(index)]!.references += delta
        if self.entries[Int(index)]!.references == 0 {
            self.entries[Int(index)] = nil
            self.freeEntries.append(index)
        }
    }

    /// Entry indices of live messages in sequence order.
    var entryIndicesBySequence: [UInt32] {
        self.entries.indices.compactMap { index in self.entries[index].map { (UInt32(index), $0.sequence) } }
            .sorted { $0.1 < $1.1 }
            .map(\.0)
    }
}
