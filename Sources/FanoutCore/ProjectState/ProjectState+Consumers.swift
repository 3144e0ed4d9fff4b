internal import DequeModule

/// Consumers and hand-out: attaching and detaching, credit, the platforms' ready queues, and
/// filling each consumer within its credit. What a consumer is handed goes to
/// `deliveries.handOuts`; the engine pushes it once the change that made it is durable.
extension ProjectState {
    /// Attaches a consumer and hands it its backlog within `credit`.
    /// - Throws: `INVALID_ARGUMENT` for a credit out of 1...65536 or an empty or oversized list of
    ///   installations; `NOT_FOUND` / `UNREGISTERED` for an installation that does not exist.
    mutating func attachConsumer(_ scope: ConsumerScope, credit: Int, sink: DeliverySink, now: Timestamp) throws(FanoutError) -> UInt64 {
        guard (1...Self.maximumCredit).contains(credit) else {
            throw .invalidArgument("credit must be in 1...\(Self.maximumCredit), got \(credit)", field: "credit")
        }
        var slots: [UInt32] = []
        if case .installations(let addresses) = scope {
            guard (1...self.configuration.maximumBatchSize).contains(addresses.count) else {
                throw .invalidArgument(
                    "a consumer attaches to 1...\(self.configuration.maximumBatchSize) installations, got \(addresses.count)",
                    field: "installations"
                )
            }
            for (position, address) in addresses.enumerated() {
                slots.append(try self.slot(for: address, field: "installations[\(position)]"))
            }
        }
        let id = self.deliveries.consumers.nextID
        self.deliveries.consumers.nextID += 1
        switch scope {
        case .installations:
            for slot in slots {
                if let previous = self.deliveries.consumers.deviceConsumer[slot] {
                    self.takeSlot(slot, from: previous)
                }
                self.deliveries.consumers.deviceConsumer[slot] = id
                self.deliveries.mailboxes.setFlag(MailboxTable.Head.hasDeviceConsumer, true, slot)
            }
            self.deliveries.consumers.byID[id] = .init(id: id, platform: nil, slots: Set(slots), credit: credit, sink: sink)
        case .platform(let platform):
            self.deliveries.consumers.byID[id] = .init(id: id, platform: platform, slots: [], credit: credit, sink: sink)
            self.deliveries.consumers.workers[platform].append(id)
            if self.deliveries.consumers.workers[platform].count == 1 {
                self.rebuildReadyQueue(platform)
            }
        }
        self.deliveries.consumers.needsFill.insert(id)
        self.dispatch(now: now)
        self.checkDeliveryInvariants()
        return id
    }

    /// Detaches a consumer: what it held unacknowledged goes back to waiting (at-least-once), and
    /// its installations' deliveries go to their platform's workers.
    mutating func detachConsumer(_ id: UInt64, now: Timestamp) {
        guard let consumer = self.deliveries.consumers.byID.removeValue(forKey: id) else { return }
        self.deliveries.consumers.needsFill.remove(id)
        if let platform = consumer.platform {
            self.deliveries.consumers.workers[platform].removeAll { $0 == id }
            if self.deliveries.consumers.workers[platform].isEmpty {
                for slot in self.deliveries.consumers.readyQueue[platform] {
                    self.deliveries.mailboxes.setFlag(MailboxTable.Head.isQueued(on: platform), false, slot)
                }
                self.deliveries.consumers.readyQueue[platform] = []
            }
        } else {
            for slot in consumer.slots {
                self.deliveries.consumers.deviceConsumer[slot] = nil
                self.deliveries.mailboxes.setFlag(MailboxTable.Head.hasDeviceConsumer, false, slot)
            }
        }
        for deliveryID in consumer.inFlight {
            self.release(deliveryID)
        }
        for slot in consumer.slots {
            if let platform = self.registry.platform(ofSlot: slot) { self.markReady(slot, platform: platform) }
        }
        consumer.sink.finish()
        self.scheduleWorkers()
        self.dispatch(now: now)
        self.checkDeliveryInvariants()
    }

    /// Raises a consumer's credit by `credit`.
    mutating func grant(_ credit: Int, to id: UInt64, now: Timestamp) throws(FanoutError) {
        guard let current = self.deliveries.consumers.byID[id]?.credit else {
            throw FanoutError(.failedPrecondition, "the consumer is detached", field: "consumer")
        }
        guard credit >= 1 else {
            throw .invalidArgument("GRANT must add at least 1 credit", field: "credit")
        }
        guard credit <= Self.maximumCredit - current else {
            throw .invalidArgument("credit may not pass \(Self.maximumCredit) in all (\(current) held)", field: "credit")
        }
        self.deliveries.consumers.byID[id]!.credit += credit
        self.deliveries.consumers.needsFill.insert(id)
        self.dispatch(now: now)
        self.checkDeliveryInvariants()
    }

    /// Finishes every consumer's stream (the engine is closing or the project going); what they
    /// held waits again, so that the mailboxes hold nothing in flight without a consumer.
    mutating func finishConsumers() {
        for consumer in self.deliveries.consumers.byID.values {
            consumer.sink.finish()
            // What `release` queues for the consumers is dropped with them below.
            for id in consumer.inFlight { self.release(id) }
        }
        self.deliveries.consumers = ConsumerTable()
        for slot in 0..<UInt32(self.deliveries.mailboxes.heads.count) {
            self.deliveries.mailboxes.setFlag(MailboxTable.Head.hasDeviceConsumer | MailboxTable.Head.isQueuedOnAnyPlatform, false, slot)
        }
        self.checkDeliveryInvariants()
    }

    /// Moves `slot` from one device consumer to the one attaching now; what the old one held from
    /// it waits again. The old one is due a fill from its other installations: what it held may
    /// have left the mailbox already (collapsed, dropped), and then no release marks it ready.
    mutating func takeSlot(_ slot: UInt32, from previous: UInt64) {
        guard let old = self.deliveries.consumers.byID[previous] else { return }
        self.deliveries.consumers.byID[previous]!.slots.remove(slot)
        for deliveryID in old.inFlight where deliveryID.slot == slot {
            self.deliveries.consumers.byID[previous]!.inFlight.remove(deliveryID)
            self.release(deliveryID)
        }
        self.deliveries.consumers.needsFill.insert(previous)
    }

    /// A delivery a consumer gave back (detached without acknowledging) waits again.
    mutating func release(_ id: DeliveryID) {
        guard let index = self.find(id)?.index, self.deliveries.mailboxes.node(index).isInFlight else { return }
        self.deliveries.mailboxes.setInFlight(index, false, in: id.slot)
        if let platform = self.registry.platform(ofSlot: id.slot) { self.markReady(id.slot, platform: platform) }
    }

    /// The consumer that would take a delivery for `slot` right now, if one has room.
    mutating func consumerWithRoom(for slot: UInt32, platform: Platform) -> UInt64? {
        if self.deliveries.mailboxes.hasFlag(MailboxTable.Head.hasDeviceConsumer, slot) {
            guard let id = self.deliveries.consumers.deviceConsumer[slot], self.deliveries.consumers.hasRoom(id) else { return nil }
            return id
        }
        return self.deliveries.consumers.workerWithRoom(for: platform)
    }

    /// Notes that `slot` has something to hand out: its device consumer is due a fill, or the slot
    /// joins its platform's ready queue (when the platform has workers).
    mutating func markReady(_ slot: UInt32, platform: Platform) {
        let flags = self.deliveries.mailboxes.head(slot).flags
        if flags & MailboxTable.Head.hasDeviceConsumer != 0 {
            if let id = self.deliveries.consumers.deviceConsumer[slot] { self.deliveries.consumers.needsFill.insert(id) }
        } else if flags & MailboxTable.Head.isQueued(on: platform) == 0 && !self.deliveries.consumers.workers[platform].isEmpty {
            self.deliveries.consumers.readyQueue[platform].append(slot)
            self.deliveries.mailboxes.setFlag(MailboxTable.Head.isQueued(on: platform), true, slot)
        }
    }

    /// Every worker of a platform with ready slots is due a fill.
    mutating func scheduleWorkers() {
        for platform in Platform.allCases where !self.deliveries.consumers.readyQueue[platform].isEmpty {
            self.deliveries.consumers.needsFill.formUnion(self.deliveries.consumers.workers[platform])
        }
    }

    /// The first worker of a platform: queue every slot of that platform with something waiting.
    mutating func rebuildReadyQueue(_ platform: Platform) {
        for (position, head) in self.deliveries.mailboxes.heads.enumerated() where !head.isEmpty {
            let slot = UInt32(position)
            if self.registry.platform(ofSlot: slot) == platform { self.markReady(slot, platform: platform) }
        }
    }

    /// Fills every consumer that may have room.
    mutating func dispatch(now: Timestamp) {
        while let id = self.deliveries.consumers.needsFill.popFirst() {
            guard let position = self.deliveries.consumers.position(of: id) else { continue }
            let consumer = self.deliveries.consumers.byID.values[position]
            guard consumer.hasRoom else { continue }
            if let platform = consumer.platform {
                self.fillWorker(position, platform: platform, now: now)
            } else {
                for slot in consumer.slots where self.deliveries.consumers.hasRoom(at: position) {
                    _ = self.fill(position, from: slot, now: now)
                }
            }
        }
    }

    /// How many slots ahead in a ready queue a worker's fill asks for records and mailboxes.
    static let fillPrefetchDistance = 4

    mutating func fillWorker(_ position: ConsumerTable.Position, platform: Platform, now: Timestamp) {
        while self.deliveries.consumers.hasRoom(at: position), let slot = self.deliveries.consumers.readyQueue[platform].popFirst() {
            // The record and mailbox head of a slot a few turns ahead, asked for now: each slot's
            // are a cache miss of their own.
            if self.deliveries.consumers.readyQueue[platform].count > Self.fillPrefetchDistance {
                let ahead = CollectionOfOne(self.deliveries.consumers.readyQueue[platform][Self.fillPrefetchDistance])
                self.registry.prefetchRecords(of: ahead)
                self.deliveries.mailboxes.prefetchFirstNodes(of: ahead)
            }
            self.deliveries.mailboxes.setFlag(MailboxTable.Head.isQueued(on: platform), false, slot)
            guard let actual = self.registry.platform(ofSlot: slot),
                !self.deliveries.mailboxes.hasFlag(MailboxTable.Head.hasDeviceConsumer, slot)
            else { continue }
            guard actual == platform else {
                // The slot was freed and taken by an installation of another platform.
                self.markReady(slot, platform: actual)
                continue
            }
            if self.fill(position, from: slot, now: now) {
                self.deliveries.consumers.readyQueue[platform].prepend(slot)
                self.deliveries.mailboxes.setFlag(MailboxTable.Head.isQueued(on: platform), true, slot)
                return
            }
        }
    }

    /// Hands the consumer at `consumer` what waits in `slot`'s mailbox (not held, not expired)
    /// while it has room; returns true when it ran out of room with deliveries left.
    mutating func fill(_ consumer: ConsumerTable.Position, from slot: UInt32, now: Timestamp) -> Bool {
        guard let platform = self.registry.platform(ofSlot: slot) else { return false }
        // Looked up once; each hand-out says what room is left.
        var hasRoom = self.deliveries.consumers.hasRoom(at: consumer)
        var index = self.deliveries.mailboxes.firstWaiting(in: slot)
        while index != MailboxTable.none {
            let node = self.deliveries.mailboxes.node(index)
            if !node.isInFlight && self.deliveries.facts[Int(node.entry)].expiry[platform] > now.millisecondsSinceEpoch {
                guard hasRoom else { return true }
                hasRoom = self.handOut(index, in: slot, platform: platform, to: consumer, entry: node.entry) > 0
            }
            index = node.next
        }
        return false
    }

    /// Hands mailbox node `index` to the consumer at `consumer`; returns the room it has left.
    @discardableResult
    mutating func handOut(_ index: UInt32, in slot: UInt32, platform: Platform, to consumer: ConsumerTable.Position, entry: UInt32) -> Int {
        self.deliveries.mailboxes.setInFlight(index, true, in: slot)
        // Read into locals first: with `self` read in the arguments of a call on `self`, the
        // optimiser copied the whole project state for every delivery.
        let node = self.deliveries.mailboxes.node(index)
        let facts = self.deliveries.facts[Int(entry)]
        let id = node.isMarker ? DeliveryID(markerOf: facts.sequence, slot: slot) : DeliveryID(messageSequence: facts.sequence, slot: slot)
        let (consumerID, room) = self.deliveries.consumers.hold(id, at: consumer)
        let handOut = self.deliveries.handOut(to: consumerID, at: consumer, room: room, project: self.id)
        let fid = self.registry.fid(ofSlot: slot)!
        let token = self.registry.tokenLocation(ofSlot: slot)
        let apnsToken = platform == .ios ? self.registry.apnsToken(ofSlot: slot) : nil
        self.deliveries.appendDelivery(
            toHandOut: handOut, id: id, fid: fid, entry: node.isMarker ? nil : entry, token: token,
            apnsToken: apnsToken, platform: platform, expiry: Timestamp(millisecondsSinceEpoch: facts.expiry[platform]), registry: self.registry
        )
        self.deliveries.counters.delivered += 1
        return room
    }
}
