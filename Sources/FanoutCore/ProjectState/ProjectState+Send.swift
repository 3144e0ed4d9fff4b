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

    /// A send: takes the project's next message sequence (the next this engine may give),
    /// resolves the audience and enqueues a delivery per recipient whose platform payload fits;
    /// returns the result and the log record that replays it.
    mutating func send(_ rendered: RenderedMessage, now: Timestamp) -> Logged<SendResult> {
        let sequence = self.configuration.messageSequences.first(atLeast: self.deliveries.nextSequence)
        let result = self.enqueueMessage(rendered, sequence: sequence, now: now)
        return self.logged(result, .send(self.id, sequence: sequence, message: rendered))
    }

    /// Takes one message of the project's send quota, and of the device's for a send to one
    /// token or FID (`SendQuota`). - Throws: `RESOURCE_EXHAUSTED`, having taken nothing.
    mutating func takeSendQuota(for target: Message.Target, now: Timestamp) throws(FanoutError) {
        var device: UInt32?
        var field = "message"
        if self.sendLimiter.limitsDevices {
            switch target {
            case .token(let token): (device, field) = (self.registry.slot(forToken: token), "message.token")
            case .fid(let fid): (device, field) = (self.registry.slot(forFID: fid), "message.fid")
            default: break
            }
        }
        try self.sendLimiter.take(device: device, field: field, in: self.id, now: now)
    }

    /// Resolves the message's audience and enqueues a delivery per recipient that has a token,
    /// is not skipped as stale, and whose platform payload fits, as message `sequence` (a new
    /// send, or a logged one replayed).
    mutating func enqueueMessage(_ rendered: RenderedMessage, sequence: UInt64, now: Timestamp) -> SendResult {
        self.deliveries.nextSequence = sequence + 1
        self.deliveries.counters.sends += 1
        self.deliveries.handsOutNewDeliveries = true
        let (audience, addressed) = self.resolveAudience(of: rendered.target)
        let fits = PerPlatform { rendered.fits($0) }
        let staleCutoff = rendered.options.skipLastSeenBefore?.millisecondsSinceEpoch
        var reports = PerPlatform { rendered.sizeReport(for: $0) }
        let entry = MessageEntry(sequence: sequence, rendered: rendered, audience: audience)
        let collapseKey = entry.collapseKey
        let isNowOrNever = entry.isNowOrNever
        let index = self.deliveries.add(entry)
        var references = 0
        for slot in audience {
            guard let (platform, hasToken) = self.registry.deliveryTarget(ofSlot: slot) else { continue }
            reports[platform].audience += 1
            if let refusal = self.refusal(of: slot, hasToken: hasToken, fits: fits[platform], staleCutoff: staleCutoff) {
                switch refusal {
                case .noToken: reports[platform].skippedWithoutToken += 1
                case .stale: reports[platform].skippedStale += 1
                case .overLimit: reports[platform].refused += 1
                }
                continue
            }
            // What the mailbox rules did, from the counters they move (three loads, no copy).
            let before = (self.deliveries.counters.collapsed, self.deliveries.counters.dropped, self.deliveries.counters.expired)
            switch self.enqueue(index, to: slot, platform: platform, collapseKey: collapseKey[platform], isNowOrNever: isNowOrNever[platform]) {
            case .enqueued:
                references += 1
                reports[platform].enqueued += 1
            case .marker:
                references += 1
            case .notEnqueued:
                break
            }
            reports[platform].collapsed += self.deliveries.counters.collapsed - before.0
            reports[platform].dropped += self.deliveries.counters.dropped - before.1
            reports[platform].expired += self.deliveries.counters.expired - before.2
        }
        self.deliveries.retain(index, count: references)
        let all = [reports.android, reports.ios, reports.web]
        self.deliveries.counters.enqueued += all.reduce(0) { $0 + $1.enqueued }
        self.deliveries.counters.rejected += all.reduce(0) { $0 + $1.refused }
        self.deliveries.counters.skipped += all.reduce(0) { $0 + $1.skippedWithoutToken + $1.skippedStale }
        self.scheduleWorkers()
        self.dispatch(now: now)
        self.checkDeliveryInvariants()

        return SendResult(
            messageID: SendResult.messageID(project: self.id, sequence: sequence),
            sequence: sequence,
            audience: audience.count,
            enqueued: all.reduce(0) { $0 + $1.enqueued },
            recipients: addressed.map { self.recipientResults($0, of: rendered.target, fits: fits, reports: reports, staleCutoff: staleCutoff) } ?? [],
            platforms: all
        )
    }

    /// Why a recipient of a send gets no delivery, before the mailbox rules: the send's rules in
    /// one place, for the fan-out and for the per-recipient results.
    enum Refusal {
        /// It has no registration token (signed out, or none given yet).
        case noToken
        /// It was last seen then, before the send's stale cutoff.
        case stale(Timestamp)
        /// Its platform's payload is over the limit.
        case overLimit
    }

    func refusal(of slot: UInt32, hasToken: Bool, fits: Bool, staleCutoff: Int64?) -> Refusal? {
        guard hasToken else { return .noToken }
        if let staleCutoff, let lastSeen = self.registry.lastSeen(ofSlot: slot), lastSeen.millisecondsSinceEpoch < staleCutoff {
            return .stale(lastSeen)
        }
        return fits ? nil : .overLimit
    }

    /// One result per address of a token, FID or multicast target, with the reason a recipient
    /// got nothing.
    private func recipientResults(
        _ slots: [UInt32?],
        of target: Message.Target,
        fits: PerPlatform<Bool>,
        reports: PerPlatform<PlatformSendReport>,
        staleCutoff: Int64?
    ) -> [RecipientResult] {
        let fields = target.recipientFields
        return slots.enumerated().map { position, slot in
            let field = fields(position)
            guard let slot, let (platform, hasToken) = self.registry.deliveryTarget(ofSlot: slot) else {
                return .failed(FanoutError(.unregistered, "no installation has this registration (unknown, deleted, rotated away or signed out)", field: field))
            }
            switch self.refusal(of: slot, hasToken: hasToken, fits: fits[platform], staleCutoff: staleCutoff) {
            case nil:
                return .ok
            case .noToken:
                return .failed(FanoutError(.failedPrecondition, "the installation has no registration token (signed out, or none given yet)", field: field))
            case .stale(let lastSeen):
                return .failed(FanoutError(.failedPrecondition, "the installation is stale (last seen \(lastSeen.iso8601)) and the send skips stale installations", field: field))
            case .overLimit:
                // The report says why: the rendered size against the limit.
                let violation = reports[platform].refusal ?? FieldViolation(field: "message.\(platform.configName)", description: "Message too big")
                var error = FanoutError(.invalidArgument, violation.description, field: field)
                error.violations = [violation]
                return .failed(error)
            }
        }
    }

    /// The slots a target reaches; for token, FID and multicast targets also each address's slot
    /// (`nil` when it addresses no live installation), in input order.
    func resolveAudience(of target: Message.Target) -> (SlotSet, [UInt32?]?) {
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

    enum EnqueueOutcome {
        case enqueued
        /// The 100-pending rule dropped the mailbox's messages (this one too) and queued the marker.
        case marker
        /// Collapsed into nothing or dropped (TTL 0 with no consumer, or a marker already waiting).
        case notEnqueued
    }

    /// Puts one delivery of entry `index` in `slot`'s mailbox under FCM's rules.
    mutating func enqueue(
        _ index: UInt32,
        to slot: UInt32,
        platform: Platform,
        collapseKey: String?,
        isNowOrNever: Bool
    ) -> EnqueueOutcome {
        if isNowOrNever {
            guard let id = self.consumerWithRoom(for: slot, platform: platform), let consumer = self.deliveries.consumers.position(of: id) else {
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
    mutating func makeRoom(forCollapseKey key: String, in slot: UInt32, platform: Platform) {
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
    func collapseKey(of node: MailboxTable.Node, platform: Platform) -> String? {
        let entry = self.deliveries.entries[Int(node.entry)]!
        return entry.isNowOrNever[platform] ? nil : entry.collapseKey[platform]
    }

    /// Removes every delivery the 100-pending rule counts from `slot`'s mailbox; returns how many.
    mutating func dropCountedDeliveries(in slot: UInt32, platform: Platform) -> Int {
        var dropped = 0
        var previous = MailboxTable.none
        var index = self.deliveries.mailboxes.first(in: slot)
        while index != MailboxTable.none {
            let node = self.deliveries.mailboxes.node(index)
            if !node.isMarker && self.deliveries.facts[Int(node.entry)].countsTowardPendingLimit[platform] {
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
    mutating func unlink(_ index: UInt32, after previous: UInt32, in slot: UInt32, platform: Platform) {
        let node = self.deliveries.mailboxes.node(index)
        self.deliveries.mailboxes.remove(index, after: previous, in: slot)
        if node.isMarker {
            self.deliveries.mailboxes.setFlag(MailboxTable.Head.hasMarker, false, slot)
        } else if self.deliveries.facts[Int(node.entry)].countsTowardPendingLimit[platform] {
            self.deliveries.mailboxes.adjustCounted(slot, by: -1)
        }
        self.deliveries.release(node.entry)
    }

    /// Finds the delivery `id` and unlinks it; false when it is not pending (acknowledged,
    /// expired, collapsed, dropped, or never there).
    mutating func removeDelivery(_ id: DeliveryID) -> Bool {
        guard let platform = self.registry.platform(ofSlot: id.slot), let found = self.find(id) else { return false }
        self.unlink(found.index, after: found.previous, in: id.slot, platform: platform)
        return true
    }

    /// The node of delivery `id` and the node before it, if it is pending.
    func find(_ id: DeliveryID) -> (index: UInt32, previous: UInt32)? {
        // A mailbox holds at most one node per message (the marker replaces the delivery of the send
        // that overflowed it), so a plain id matches by sequence alone, as logs written before
        // markers had ids of their own acknowledged them; a marker's id matches only the marker.
        let isMarker = id.isDeletedMessagesMarker
        let sequence = id.messageSequence & ~DeliveryID.markerBit
        return self.deliveries.mailboxes.first(in: id.slot) { ($0.isMarker || !isMarker) && self.deliveries.facts[Int($0.entry)].sequence == sequence }
    }
}
