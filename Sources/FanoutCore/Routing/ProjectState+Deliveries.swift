internal import DequeModule

/// FCM's delivery rules over one project's mailboxes (fcm-rules.md section 5, design.md section 2):
/// TTL and TTL 0, collapse keys (at most 4 per installation), the 100-pending rule with its
/// "deleted messages" marker, and hand-out to consumers within their credit.
///
/// Everything that decides what a mailbox holds depends only on the logged operations (sends,
/// acknowledgements, sweeps, deletions), never on which consumer happened to hold what, so replaying
/// the log rebuilds the same mailboxes. The one exception is TTL 0, whose deliveries exist only
/// while a consumer holds them: they are neither counted, collapsed nor restored.
extension ProjectState {
    /// More pending non-collapsible deliveries than this drops them all (FCM's Android rule).
    static let maximumPendingPerInstallation: UInt8 = 100
    /// Collapse keys kept per installation; a fifth evicts the oldest.
    static let maximumCollapseKeys = 4
    /// The most credit one consumer may hold.
    static let maximumCredit = 1 << 16

    // MARK: - Send

    /// Resolves the message's audience and enqueues a delivery per recipient whose platform payload
    /// fits. The caller logs the send.
    mutating func send(_ rendered: RenderedMessage, body: [UInt8], sequence: UInt64, now: Timestamp) -> SendResult {
        self.deliveries.nextSequence = sequence + 1
        self.deliveries.counters.sends += 1
        let (audience, addressed) = self.resolveAudience(of: rendered.message.target)
        let fits = PerPlatform { rendered.fits($0) }
        let entry = MessageEntry(sequence: sequence, rendered: rendered, body: body, audience: audience)
        let collapseKey = entry.collapseKey
        let isNowOrNever = entry.isNowOrNever
        let index = self.deliveries.add(entry)
        var references = 0
        var enqueued = 0
        var rejected = 0
        for slot in audience {
            guard let platform = self.registry.platform(ofSlot: slot) else { continue }
            guard fits[platform] else {
                rejected += 1
                continue
            }
            switch self.enqueue(index, to: slot, platform: platform, collapseKey: collapseKey[platform], isNowOrNever: isNowOrNever[platform]) {
            case .enqueued:
                references += 1
                enqueued += 1
            case .marker:
                references += 1
            case .notEnqueued:
                break
            }
        }
        self.deliveries.retain(index, count: references)
        self.deliveries.counters.enqueued += enqueued
        self.deliveries.counters.rejected += rejected
        self.scheduleWorkers()
        self.dispatch(now: now)
        self.checkDeliveryInvariants()

        let recipients = addressed?.map { slot -> BatchItemResult in
            guard let slot, let platform = self.registry.platform(ofSlot: slot) else { return .failed(.unregistered) }
            return fits[platform] ? .ok : .failed(.invalidArgument)
        }
        return SendResult(
            messageID: SendResult.messageID(project: self.id, sequence: sequence),
            sequence: sequence,
            audience: audience.count,
            enqueued: enqueued,
            recipients: recipients ?? []
        )
    }

    /// The slots a target reaches; for token, FID and multicast targets also each address's slot
    /// (`nil` when it addresses no live installation), in input order.
    private func resolveAudience(of target: Message.Target) -> (SlotSet, [UInt32?]?) {
        switch target {
        case .token(let token):
            let slot = self.registry.slot(forToken: token)
            return (SlotSet(slot.map { [$0] } ?? []), [slot])
        case .fid(let fid):
            let slot = self.registry.slot(forFID: fid)
            return (SlotSet(slot.map { [$0] } ?? []), [slot])
        case .multicast(let addresses):
            let slots = self.registry.slots(for: addresses)
            return (SlotSet(slots.compactMap { $0 }), slots)
        case .topic(let topic):
            return (self.topics.subscribers(of: topic), nil)
        case .condition(let condition):
            return (condition.evaluate(topic: { self.topics.subscribers(of: $0) }, all: { self.registry.liveSlots }), nil)
        case .user(let user):
            return (SlotSet(self.deviceSlots(of: user)), nil)
        }
    }

    private enum EnqueueOutcome {
        case enqueued
        /// The 100-pending rule dropped the mailbox's messages (this one too) and queued the marker.
        case marker
        /// Collapsed into nothing or dropped (TTL 0 with no consumer, or a marker already waiting).
        case notEnqueued
    }

    /// Puts one delivery of entry `index` in `slot`'s mailbox under FCM's rules.
    private mutating func enqueue(
        _ index: UInt32,
        to slot: UInt32,
        platform: Platform,
        collapseKey: String?,
        isNowOrNever: Bool
    ) -> EnqueueOutcome {
        if isNowOrNever {
            guard let consumer = self.consumerWithRoom(for: slot, platform: platform) else {
                self.deliveries.counters.expired += 1
                return .notEnqueued
            }
            let node = self.deliveries.mailboxes.append(.init(entry: index, isMarker: false, isInFlight: false), to: slot)
            self.handOut(node, in: slot, platform: platform, to: consumer, entry: index)
            return .enqueued
        }
        if let collapseKey {
            self.makeRoom(forCollapseKey: collapseKey, in: slot, platform: platform)
        } else if self.deliveries.mailboxes.head(slot).counted >= Self.maximumPendingPerInstallation {
            let dropped = self.dropCountedDeliveries(in: slot, platform: platform)
            self.deliveries.counters.dropped += dropped + 1
            guard !self.deliveries.mailboxes.hasFlag(MailboxTable.Head.hasMarker, slot) else { return .notEnqueued }
            self.deliveries.mailboxes.append(.init(entry: index, isMarker: true, isInFlight: false), to: slot)
            self.deliveries.mailboxes.setFlag(MailboxTable.Head.hasMarker, true, slot)
            self.markReady(slot, platform: platform)
            return .marker
        }
        self.deliveries.mailboxes.append(.init(entry: index, isMarker: false, isInFlight: false), to: slot)
        if collapseKey == nil { self.deliveries.mailboxes.adjustCounted(slot, by: 1) }
        self.markReady(slot, platform: platform)
        return .enqueued
    }

    /// Before a collapsible delivery is added: removes the delivery with the same key, or else,
    /// when 4 keys are already kept, the oldest collapsible delivery.
    private mutating func makeRoom(forCollapseKey key: String, in slot: UInt32, platform: Platform) {
        var keys: [String] = []
        var oldest: (index: UInt32, previous: UInt32)? = nil
        var previous = MailboxTable.none
        var index = self.deliveries.mailboxes.first(in: slot)
        while index != MailboxTable.none {
            let node = self.deliveries.mailboxes.node(index)
            if !node.isMarker, let other = self.collapseKey(of: node, platform: platform) {
                if other == key {
                    self.unlink(index, after: previous, in: slot, platform: platform)
                    self.deliveries.counters.collapsed += 1
                    return
                }
                if oldest == nil { oldest = (index, previous) }
                if !keys.contains(other) { keys.append(other) }
            }
            previous = index
            index = node.next
        }
        if keys.count >= Self.maximumCollapseKeys, let oldest {
            self.unlink(oldest.index, after: oldest.previous, in: slot, platform: platform)
            self.deliveries.counters.collapsed += 1
        }
    }

    /// The collapse key of a (non-marker) delivery on `platform`, unless it is TTL 0 (exempt).
    private func collapseKey(of node: MailboxTable.Node, platform: Platform) -> String? {
        let entry = self.deliveries.entries[Int(node.entry)]!
        return entry.isNowOrNever[platform] ? nil : entry.collapseKey[platform]
    }

    /// Removes every delivery the 100-pending rule counts from `slot`'s mailbox; returns how many.
    private mutating func dropCountedDeliveries(in slot: UInt32, platform: Platform) -> Int {
        var dropped = 0
        var previous = MailboxTable.none
        var index = self.deliveries.mailboxes.first(in: slot)
        while index != MailboxTable.none {
            let node = self.deliveries.mailboxes.node(index)
            if !node.isMarker && self.deliveries.entries[Int(node.entry)]!.countsTowardPendingLimit(on: platform) {
                self.unlink(index, after: previous, in: slot, platform: platform)
                dropped += 1
            } else {
                previous = index
            }
            index = node.next
        }
        return dropped
    }

    /// Unlinks a node and releases its message, keeping the mailbox's count and marker flag true.
    private mutating func unlink(_ index: UInt32, after previous: UInt32, in slot: UInt32, platform: Platform) {
        let node = self.deliveries.mailboxes.node(index)
        self.deliveries.mailboxes.remove(index, after: previous, in: slot)
        if node.isMarker {
            self.deliveries.mailboxes.setFlag(MailboxTable.Head.hasMarker, false, slot)
        } else if self.deliveries.entries[Int(node.entry)]!.countsTowardPendingLimit(on: platform) {
            self.deliveries.mailboxes.adjustCounted(slot, by: -1)
        }
        self.deliveries.release(node.entry)
    }

    /// Finds the delivery `id` and unlinks it; false when it is not pending (acknowledged,
    /// expired, collapsed, dropped, or never there).
    private mutating func removeDelivery(_ id: DeliveryID) -> Bool {
        guard let platform = self.registry.platform(ofSlot: id.slot), let found = self.find(id) else { return false }
        self.unlink(found.index, after: found.previous, in: id.slot, platform: platform)
        return true
    }

    /// The node of delivery `id` and the node before it, if it is pending.
    private func find(_ id: DeliveryID) -> (index: UInt32, previous: UInt32)? {
        self.deliveries.mailboxes.first(in: id.slot) { self.deliveries.entries[Int($0.entry)]!.sequence == id.messageSequence }
    }

    // MARK: - Acknowledgements, expiry, deletion

    /// Acknowledges deliveries the consumer holds; returns those that were still pending (what the
    /// log records). Ids the consumer does not hold are ignored.
    mutating func acknowledge(_ ids: [DeliveryID], consumer: UInt64, now: Timestamp) throws(FanoutError) -> [DeliveryID] {
        guard self.deliveries.consumers.byID[consumer] != nil else {
            throw FanoutError(.failedPrecondition, "the consumer is detached", field: "consumer")
        }
        var acknowledged: [DeliveryID] = []
        for id in ids where self.deliveries.consumers.byID[consumer]!.inFlight.remove(id) != nil {
            if self.removeDelivery(id) { acknowledged.append(id) }
        }
        self.deliveries.counters.acknowledged += acknowledged.count
        self.deliveries.consumers.needsFill.insert(consumer)
        self.dispatch(now: now)
        self.checkDeliveryInvariants()
        return acknowledged
    }

    /// Replays logged acknowledgements.
    mutating func replayAcknowledgements(_ ids: [DeliveryID]) {
        for id in ids { _ = self.removeDelivery(id) }
    }

    /// Removes every delivery whose expiry is at or before `now`; returns how many.
    mutating func expireDeliveries(now: Timestamp) -> Int {
        let cutoff = now.millisecondsSinceEpoch
        var expired = 0
        for position in self.deliveries.entries.indices {
            guard let entry = self.deliveries.entries[position] else { continue }
            let due = Platform.allCases.contains { entry.expiry[$0] > entry.lastSweep && entry.expiry[$0] <= cutoff }
            guard due else { continue }
            let index = UInt32(position)
            self.deliveries.entries[position]!.lastSweep = cutoff
            for slot in entry.audience {
                guard self.deliveries.entries[position] != nil else { break }
                guard let platform = self.registry.platform(ofSlot: slot), entry.expiry[platform] <= cutoff,
                    let found = self.deliveries.mailboxes.first(in: slot, where: { $0.entry == index })
                else { continue }
                self.unlink(found.index, after: found.previous, in: slot, platform: platform)
                expired += 1
            }
        }
        self.deliveries.counters.expired += expired
        self.checkDeliveryInvariants()
        return expired
    }

    /// Drops the mailbox of an installation that is being deleted, and detaches it from its
    /// device consumer.
    mutating func dropMailbox(_ slot: UInt32) {
        guard let platform = self.registry.platform(ofSlot: slot) else { return }
        var dropped = 0
        var index = self.deliveries.mailboxes.first(in: slot)
        while index != MailboxTable.none {
            let next = self.deliveries.mailboxes.node(index).next
            self.unlink(index, after: MailboxTable.none, in: slot, platform: platform)
            dropped += 1
            index = next
        }
        self.deliveries.counters.dropped += dropped
        if let consumer = self.deliveries.consumers.deviceConsumer.removeValue(forKey: slot) {
            self.deliveries.consumers.byID[consumer]?.slots.remove(slot)
            self.deliveries.mailboxes.setFlag(MailboxTable.Head.hasDeviceConsumer, false, slot)
        }
    }

    /// The deliveries waiting for one installation, oldest first (expired ones are left out).
    func pendingDeliveries(of slot: UInt32, now: Timestamp) -> [Delivery] {
        guard let platform = self.registry.platform(ofSlot: slot) else { return [] }
        var result: [Delivery] = []
        self.deliveries.mailboxes.forEach(in: slot) { _, node in
            let entry = self.deliveries.entries[Int(node.entry)]!
            if entry.expiry[platform] > now.millisecondsSinceEpoch {
                result.append(self.delivery(of: node, entry: entry, slot: slot, platform: platform))
            }
            return true
        }
        return result
    }

    private func delivery(of node: MailboxTable.Node, entry: MessageEntry, slot: UInt32, platform: Platform) -> Delivery {
        Delivery(
            id: DeliveryID(messageSequence: entry.sequence, slot: slot),
            project: self.id,
            fid: self.registry.fid(ofSlot: slot)!,
            token: self.registry.token(ofSlot: slot),
            platform: platform,
            expiry: Timestamp(millisecondsSinceEpoch: entry.expiry[platform]),
            message: node.isMarker ? nil : entry.rendered,
            isInFlight: node.isInFlight
        )
    }

    // MARK: - Consumers

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
                    self.deliveries.mailboxes.setFlag(MailboxTable.Head.isQueued, false, slot)
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
    }

    /// Finishes every consumer's stream (the engine is closing or the project going).
    mutating func finishConsumers() {
        for consumer in self.deliveries.consumers.byID.values { consumer.sink.finish() }
        self.deliveries.consumers = ConsumerTable()
        for slot in 0..<UInt32(self.deliveries.mailboxes.heads.count) {
            self.deliveries.mailboxes.setFlag(MailboxTable.Head.hasDeviceConsumer | MailboxTable.Head.isQueued, false, slot)
        }
    }

    /// Moves `slot` from one device consumer to the one attaching now; what the old one held from
    /// it waits again.
    private mutating func takeSlot(_ slot: UInt32, from previous: UInt64) {
        guard let old = self.deliveries.consumers.byID[previous] else { return }
        self.deliveries.consumers.byID[previous]!.slots.remove(slot)
        for deliveryID in old.inFlight where deliveryID.slot == slot {
            self.deliveries.consumers.byID[previous]!.inFlight.remove(deliveryID)
            self.release(deliveryID)
        }
    }

    /// A delivery a consumer gave back (detached without acknowledging) waits again.
    private mutating func release(_ id: DeliveryID) {
        guard let index = self.find(id)?.index, self.deliveries.mailboxes.node(index).isInFlight else { return }
        self.deliveries.mailboxes.setInFlight(index, false)
        if let platform = self.registry.platform(ofSlot: id.slot) { self.markReady(id.slot, platform: platform) }
    }

    /// The consumer that would take a delivery for `slot` right now, if one has room.
    private mutating func consumerWithRoom(for slot: UInt32, platform: Platform) -> UInt64? {
        if self.deliveries.mailboxes.hasFlag(MailboxTable.Head.hasDeviceConsumer, slot) {
            guard let id = self.deliveries.consumers.deviceConsumer[slot],
                self.deliveries.consumers.byID[id]?.hasRoom == true
            else { return nil }
            return id
        }
        return self.deliveries.consumers.workerWithRoom(for: platform)
    }

    /// Notes that `slot` has something to hand out: its device consumer is due a fill, or the slot
    /// joins its platform's ready queue (when the platform has workers).
    private mutating func markReady(_ slot: UInt32, platform: Platform) {
        let flags = self.deliveries.mailboxes.head(slot).flags
        if flags & MailboxTable.Head.hasDeviceConsumer != 0 {
            if let id = self.deliveries.consumers.deviceConsumer[slot] { self.deliveries.consumers.needsFill.insert(id) }
        } else if flags & MailboxTable.Head.isQueued == 0 && !self.deliveries.consumers.workers[platform].isEmpty {
            self.deliveries.consumers.readyQueue[platform].append(slot)
            self.deliveries.mailboxes.setFlag(MailboxTable.Head.isQueued, true, slot)
        }
    }

    /// Every worker of a platform with ready slots is due a fill.
    private mutating func scheduleWorkers() {
        for platform in Platform.allCases where !self.deliveries.consumers.readyQueue[platform].isEmpty {
            self.deliveries.consumers.needsFill.formUnion(self.deliveries.consumers.workers[platform])
        }
    }

    /// The first worker of a platform: queue every slot of that platform with something waiting.
    private mutating func rebuildReadyQueue(_ platform: Platform) {
        for (position, head) in self.deliveries.mailboxes.heads.enumerated() where !head.isEmpty {
            let slot = UInt32(position)
            if self.registry.platform(ofSlot: slot) == platform { self.markReady(slot, platform: platform) }
        }
    }

    /// Fills every consumer that may have room.
    private mutating func dispatch(now: Timestamp) {
        while let id = self.deliveries.consumers.needsFill.popFirst() {
            guard let consumer = self.deliveries.consumers.byID[id], consumer.hasRoom else { continue }
            if let platform = consumer.platform {
                self.fillWorker(id, platform: platform, now: now)
            } else {
                for slot in consumer.slots where self.deliveries.consumers.byID[id]!.hasRoom {
                    _ = self.fill(id, from: slot, now: now)
                }
            }
        }
    }

    private mutating func fillWorker(_ id: UInt64, platform: Platform, now: Timestamp) {
        while self.deliveries.consumers.byID[id]!.hasRoom, let slot = self.deliveries.consumers.readyQueue[platform].popFirst() {
            self.deliveries.mailboxes.setFlag(MailboxTable.Head.isQueued, false, slot)
            guard let actual = self.registry.platform(ofSlot: slot),
                !self.deliveries.mailboxes.hasFlag(MailboxTable.Head.hasDeviceConsumer, slot)
            else { continue }
            guard actual == platform else {
                // The slot was freed and taken by an installation of another platform.
                self.markReady(slot, platform: actual)
                continue
            }
            if self.fill(id, from: slot, now: now) {
                self.deliveries.consumers.readyQueue[platform].prepend(slot)
                self.deliveries.mailboxes.setFlag(MailboxTable.Head.isQueued, true, slot)
                return
            }
        }
    }

    /// Hands the consumer what waits in `slot`'s mailbox (not held, not expired) while it has room;
    /// returns true when it ran out of room with deliveries left.
    private mutating func fill(_ id: UInt64, from slot: UInt32, now: Timestamp) -> Bool {
        guard let platform = self.registry.platform(ofSlot: slot) else { return false }
        var index = self.deliveries.mailboxes.first(in: slot)
        while index != MailboxTable.none {
            let node = self.deliveries.mailboxes.node(index)
            if !node.isInFlight && self.deliveries.entries[Int(node.entry)]!.expiry[platform] > now.millisecondsSinceEpoch {
                guard self.deliveries.consumers.byID[id]!.hasRoom else { return true }
                self.handOut(index, in: slot, platform: platform, to: id, entry: node.entry)
            }
            index = node.next
        }
        return false
    }

    private mutating func handOut(_ index: UInt32, in slot: UInt32, platform: Platform, to id: UInt64, entry: UInt32) {
        self.deliveries.mailboxes.setInFlight(index, true)
        let delivery = self.delivery(
            of: self.deliveries.mailboxes.node(index),
            entry: self.deliveries.entries[Int(entry)]!,
            slot: slot,
            platform: platform
        )
        self.deliveries.consumers.byID[id]!.inFlight.insert(delivery.id)
        self.deliveries.handOuts.append(HandOut(sink: self.deliveries.consumers.byID[id]!.sink, delivery: delivery))
        self.deliveries.counters.delivered += 1
    }
}

// MARK: - Invariants

extension ProjectState {
    /// In debug builds, after every delivery operation: each mailbox's count and marker flag match
    /// its nodes, and each message's reference count matches the nodes naming it.
    func checkDeliveryInvariants() {
        #if FANOUT_INTERNAL_CHECKS
        self.deliveries.mailboxes.checkInvariants()
        var references = [Int](repeating: 0, count: self.deliveries.entries.count)
        for position in self.deliveries.mailboxes.heads.indices {
            let slot = UInt32(position)
            let head = self.deliveries.mailboxes.head(slot)
            guard let platform = self.registry.platform(ofSlot: slot) else {
                precondition(head.isEmpty, "a free slot has a mailbox")
                continue
            }
            var counted = 0
            var markers = 0
            self.deliveries.mailboxes.forEach(in: slot) { _, node in
                let entry = self.deliveries.entries[Int(node.entry)]!
                references[Int(node.entry)] += 1
                if node.isMarker { markers += 1 } else if entry.countsTowardPendingLimit(on: platform) { counted += 1 }
                return true
            }
            precondition(counted == Int(head.counted), "slot \(slot) counts \(head.counted), holds \(counted)")
            precondition(markers <= 1 && (markers == 1) == (head.flags & MailboxTable.Head.hasMarker != 0), "slot \(slot) marker flag")
        }
        for (index, entry) in self.deliveries.entries.enumerated() {
            precondition((entry?.references ?? 0) == references[index], "message entry \(index) references")
        }
        #endif
    }
}

// MARK: - Durability

extension ProjectState {
    /// Parses and renders a logged send body, as it was when it was accepted at `at`.
    static func renderLogged(_ body: [UInt8], at: Timestamp) throws(FanoutError) -> RenderedMessage {
        do {
            return RenderedMessage(try MessageParser.parseSendRequest(body).message, acceptedAt: at)
        } catch {
            throw FanoutError(.internal, "replay: a logged message no longer validates: \(error.message)")
        }
    }

    /// Replays a logged send.
    mutating func replaySend(sequence: UInt64, at: Timestamp, body: [UInt8]) throws(FanoutError) {
        guard sequence >= self.deliveries.nextSequence else {
            throw FanoutError(.internal, "replay: message \(sequence) logged after \(self.deliveries.nextSequence - 1)")
        }
        _ = self.send(try Self.renderLogged(body, at: at), body: body, sequence: sequence, now: at)
    }

    /// Restores a snapshot's message with its pending deliveries and markers, appended in
    /// ascending sequence order as the snapshot lists them, so every mailbox keeps its order.
    mutating func restoreMessage(sequence: UInt64, at: Timestamp, body: [UInt8], slots: [UInt32], markerSlots: [UInt32]) throws(FanoutError) {
        guard sequence >= self.deliveries.nextSequence else {
            throw FanoutError(.internal, "replay: message \(sequence) restored out of order")
        }
        let rendered = try Self.renderLogged(body, at: at)
        let markers = Set(markerSlots)
        let audience = SlotSet(slots + markerSlots)
        guard audience.count == slots.count + markerSlots.count else {
            throw FanoutError(.internal, "replay: message \(sequence) has a delivery and a marker in one mailbox")
        }
        let index = self.deliveries.add(MessageEntry(sequence: sequence, rendered: rendered, body: body, audience: audience))
        for slot in audience {
            guard let platform = self.registry.platform(ofSlot: slot) else {
                throw FanoutError(.internal, "replay: message \(sequence) waits in slot \(slot), which holds no installation")
            }
            let isMarker = markers.contains(slot)
            self.deliveries.mailboxes.append(.init(entry: index, isMarker: isMarker, isInFlight: false), to: slot)
            if isMarker {
                self.deliveries.mailboxes.setFlag(MailboxTable.Head.hasMarker, true, slot)
            } else if self.deliveries.entries[Int(index)]!.countsTowardPendingLimit(on: platform) {
                self.deliveries.mailboxes.adjustCounted(slot, by: 1)
            }
        }
        self.deliveries.retain(index, count: audience.count)
        self.deliveries.nextSequence = max(self.deliveries.nextSequence, sequence + 1)
    }

    /// Snapshot records of the messages with pending deliveries (in sequence order, each with the
    /// slots it waits in) and the next sequence number. TTL-0 deliveries are left out: they exist
    /// only while a consumer holds them.
    func snapshotMessageRecords() -> [WALRecord] {
        var slots: [UInt32: [UInt32]] = [:]
        var markerSlots: [UInt32: [UInt32]] = [:]
        for position in self.deliveries.mailboxes.heads.indices {
            let slot = UInt32(position)
            guard let platform = self.registry.platform(ofSlot: slot) else { continue }
            self.deliveries.mailboxes.forEach(in: slot) { _, node in
                if node.isMarker {
                    markerSlots[node.entry, default: []].append(slot)
                } else if !self.deliveries.entries[Int(node.entry)]!.isNowOrNever[platform] {
                    slots[node.entry, default: []].append(slot)
                }
                return true
            }
        }
        var records: [WALRecord] = []
        for index in self.deliveries.entryIndicesBySequence {
            let pending = slots[index] ?? []
            let markers = markerSlots[index] ?? []
            guard !pending.isEmpty || !markers.isEmpty, let entry = self.deliveries.entries[Int(index)] else { continue }
            records.append(
                .restoreMessage(self.id, sequence: entry.sequence, at: entry.rendered.acceptedAt, body: entry.body, slots: pending, markerSlots: markers)
            )
        }
        records.append(.restoreMessageSequence(self.id, next: self.deliveries.nextSequence))
        return records
    }
}
