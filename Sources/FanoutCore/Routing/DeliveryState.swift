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
    /// The serial of the last hand-out's `DeliveryReferences` (serials start at 1).
    private var lastReferencesSerial: UInt64 = 0
    /// Per entry index: the serial of the last hand-out that holds the entry's message, and the
    /// message's index there (a new entry starts unmarked).
    private var entryMarks: [(serial: UInt64, index: UInt32)] = []
    /// Per token chunk index: the serial of the last hand-out that holds the chunk, and the
    /// chunk's bytes (which tell a reused index apart).
    private var chunkMarks: [(serial: UInt64, bytes: UInt)] = []
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

    /// The hand-out a delivery to the consumer at `position` (with id `consumer`) joins: a fill
    /// hands one consumer its deliveries one after another, so they join that consumer's batch
    /// (sized for its `room`).
    mutating func handOut(to consumer: UInt64, at position: ConsumerTable.Position, room: Int, project: ProjectID) -> Int {
        if let last = self.handOuts.indices.last, self.handOuts[last].consumer == consumer {
            return last
        }
        self.lastReferencesSerial += 1
        self.handOuts.append(HandOut(
            consumer: consumer, sink: self.consumers.sink(at: position),
            references: DeliveryReferences(project: project, serial: self.lastReferencesSerial), capacity: room + 1
        ))
        return self.handOuts.count - 1
    }

    /// Appends to hand-out `index` the delivery of entry `entry`'s message (`nil`: its marker) to
    /// an installation, with the hand-out's references.
    mutating func appendDelivery(
        toHandOut index: Int, id: DeliveryID, fid: FID, entry: UInt32?, token: TokenLocation?,
        apnsToken: APNsDeviceToken?, platform: Platform, expiry: Timestamp, registry: InstallationRegistry
    ) {
        let messageIndex = entry.map { self.messageIndex(ofEntry: $0, inHandOut: index) } ?? Delivery.noMessage
        if let token { self.keepChunk(of: token, inHandOut: index, registry: registry) }
        var apnsTokenIndex = HandedOut.noAPNsToken
        if let apnsToken {
            apnsTokenIndex = UInt32(self.handOuts[index].apnsTokens.count)
            self.handOuts[index].apnsTokens.append(apnsToken)
        }
        self.handOuts[index].handedOut.append(HandedOut(
            id: id, fid: fid, tokenEntry: token?.entry, platform: platform, expiry: expiry, messageIndex: messageIndex, apnsToken: apnsTokenIndex
        ))
    }

    /// The index in hand-out `handOut`'s references of entry `entry`'s message, which they hold
    /// from the first of its deliveries that carries it.
    private mutating func messageIndex(ofEntry entry: UInt32, inHandOut handOut: Int) -> UInt32 {
        let serial = self.handOuts[handOut].references.serial
        if self.entryMarks[Int(entry)].serial == serial {
            return self.entryMarks[Int(entry)].index
        }
        let index = self.handOuts[handOut].references.add(Self.rendered(of: &self.entries[Int(entry)]))
        self.entryMarks[Int(entry)] = (serial, index)
        return index
    }

    /// Makes hand-out `handOut`'s references hold the chunk of the token at `location`, unless
    /// they do already.
    private mutating func keepChunk(of location: TokenLocation, inHandOut handOut: Int, registry: InstallationRegistry) {
        if location.chunk >= self.chunkMarks.count {
            self.chunkMarks.append(contentsOf: repeatElement((serial: 0, bytes: 0), count: location.chunk + 1 - self.chunkMarks.count))
        }
        // A chunk index freed and reused while the batch is made is a new chunk at another address
        // (the batch holds the old one).
        let mark = (self.handOuts[handOut].references.serial, UInt(bitPattern: location.chunkBytes))
        guard self.chunkMarks[location.chunk] != mark else { return }
        self.handOuts[handOut].references.keep(registry.tokenChunk(location.chunk))
        self.chunkMarks[location.chunk] = mark
    }

    /// An entry's rendered message, read in place: binding `entries[i]!` copied the whole entry
    /// (collapse keys, audience).
    private static func rendered(of entry: inout MessageEntry?) -> RenderedMessage {
        entry!.rendered
    }

    /// Stores a message entry with no references yet; returns its index. Its deliveries are then
    /// counted with `retain`, which drops the entry if there are none.
    mutating func add(_ entry: MessageEntry) -> UInt32 {
        if let index = self.freeEntries.popLast() {
            self.entries[Int(index)] = entry
            self.facts[Int(index)] = MessageFacts(entry)
            self.entryMarks[Int(index)] = (serial: 0, index: 0)
            return index
        }
        self.entries.append(entry)
        self.facts.append(MessageFacts(entry))
        self.entryMarks.append((serial: 0, index: 0))
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
