internal import DequeModule

/// The consumers attached to one project, and which installations' deliveries go to whom.
///
/// A device consumer owns its slots (their mailboxes carry a flag, so the send path needs no
/// lookup); every other slot's deliveries go to the workers of its platform, which take turns
/// pulling slots from the platform's ready queue. The queues are kept only while a platform has
/// workers. Not thread-safe: the engine serialises access per project.
struct ConsumerTable {
    struct Consumer {
        let id: UInt64
        /// The platform of a worker; `nil` for a device consumer.
        let platform: Platform?
        /// A device consumer's slots.
        var slots: Set<UInt32>
        /// The most unacknowledged deliveries it may hold.
        var credit: Int
        var inFlight = HeldDeliveries()
        let sink: DeliverySink

        var hasRoom: Bool { self.inFlight.count < self.credit }
    }

    var byID: [UInt64: Consumer] = [:]
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

    /// Notes that the consumer at `position` holds `delivery`; returns its id and the room it has
    /// left (not its sink: returning that retained and released it for every delivery).
    mutating func hold(_ delivery: DeliveryID, at position: Position) -> (consumer: UInt64, room: Int) {
        Self.hold(delivery, by: &self.byID.values[position])
    }

    // In place, as `hasRoom`.
    private static func hold(_ delivery: DeliveryID, by consumer: inout Consumer) -> (consumer: UInt64, room: Int) {
        consumer.inFlight.insert(delivery)
        return (consumer.id, consumer.credit - consumer.inFlight.count)
    }

    /// The sink of the consumer at `position`, read in place (reading `byID.values[position]`
    /// copied the consumer).
    mutating func sink(at position: Position) -> DeliverySink {
        Self.sink(of: &self.byID.values[position])
    }

    private static func sink(of consumer: inout Consumer) -> DeliverySink {
        consumer.sink
    }

    /// Notes that consumer `id` no longer holds `deliveries`; returns those it did hold, in order
    /// (an ACK's ids: the consumer is looked up once for all of them).
    mutating func unhold(_ deliveries: [DeliveryID], by id: UInt64) -> [DeliveryID] {
        guard let index = self.byID.index(forKey: id) else { return [] }
        return Self.unhold(deliveries, by: &self.byID.values[index])
    }

    // In place, as `hasRoom`: `byID[id]!.inFlight.remove(_:)` copied the consumer for every id.
    private static func unhold(_ deliveries: [DeliveryID], by consumer: inout Consumer) -> [DeliveryID] {
        var held: [DeliveryID] = []
        held.reserveCapacity(deliveries.count)
        // Buckets asked for a few ids ahead: each is a cache miss of its own.
        let ahead = 8
        for delivery in deliveries.prefix(ahead) { consumer.inFlight.prefetch(delivery) }
        for position in deliveries.indices {
            if position + ahead < deliveries.count { consumer.inFlight.prefetch(deliveries[position + ahead]) }
            if consumer.inFlight.remove(deliveries[position]) { held.append(deliveries[position]) }
        }
        return held
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
