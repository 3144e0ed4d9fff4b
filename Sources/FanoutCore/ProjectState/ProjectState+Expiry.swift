/// What takes deliveries out of mailboxes besides a newer message: acknowledgements, TTL expiry
/// and an installation's deletion; and the listing of what waits (`pendingDeliveries`).
extension ProjectState {
    /// Acknowledges deliveries the consumer holds; returns how many were still pending (the log
    /// records those, sorted). Ids the consumer does not hold are ignored.
    mutating func acknowledge(_ ids: [DeliveryID], consumer: UInt64, now: Timestamp) throws(FanoutError) -> Logged<Int> {
        // `index(forKey:)`: comparing `byID[consumer]` with nil copied the whole consumer.
        guard self.deliveries.consumers.byID.index(forKey: consumer) != nil else {
            throw FanoutError(.failedPrecondition, "the consumer is detached", field: "consumer")
        }
        var acknowledged: [DeliveryID] = []
        self.deliveries.mailboxes.prefetchFirstNodes(of: ids.lazy.map(\.slot))
        for id in self.deliveries.consumers.unhold(ids, by: consumer) where self.removeDelivery(id) {
            acknowledged.append(id)
        }
        self.deliveries.counters.acknowledged += acknowledged.count
        self.deliveries.consumers.needsFill.insert(consumer)
        self.dispatch(now: now)
        self.checkDeliveryInvariants()
        acknowledged.sort()
        return self.logged(acknowledged.count, when: !acknowledged.isEmpty, .acknowledge(self.id, deliveries: acknowledged))
    }

    /// Replays logged acknowledgements.
    mutating func replayAcknowledgements(_ ids: [DeliveryID]) {
        for id in ids { _ = self.removeDelivery(id) }
    }

    /// Removes every delivery whose expiry is at or before `now`; returns how many.
    mutating func expireDeliveries(now: Timestamp) -> Logged<Int> {
        let cutoff = now.millisecondsSinceEpoch
        var expired = 0
        // Which messages are due, read in place through the buffer: binding each entry would copy
        // it (a dozen retains and releases) for every message at every sweep, under the lock.
        let due: [Int] = self.deliveries.entries.withUnsafeBufferPointer { entries in
            var due: [Int] = []
            for position in entries.indices {
                guard let expiry = entries[position]?.expiry, let lastSweep = entries[position]?.lastSweep else { continue }
                if Platform.allCases.contains(where: { expiry[$0] > lastSweep && expiry[$0] <= cutoff }) { due.append(position) }
            }
            return due
        }
        for position in due {
            guard let entry = self.deliveries.entries[position] else { continue }
            let index = UInt32(position)
            self.deliveries.entries[position]?.lastSweep = cutoff
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
        return self.logged(expired, when: expired != 0, .expireDeliveries(self.id, at: now))
    }

    /// Drops the mailbox of an installation that is being deleted, and detaches it from its
    /// device consumer.
    mutating func dropMailbox(_ slot: UInt32) {
        self.dropPendingDeliveries(slot)
        if let consumer = self.deliveries.consumers.deviceConsumer.removeValue(forKey: slot) {
            self.deliveries.consumers.byID[consumer]?.slots.remove(slot)
            self.deliveries.mailboxes.setFlag(MailboxTable.Head.hasDeviceConsumer, false, slot)
        }
    }

    /// Drops every delivery waiting for an installation (counted as dropped): it is being deleted,
    /// or has lost its token (sign-out), so no worker could push them.
    mutating func dropPendingDeliveries(_ slot: UInt32) {
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
    }

    /// The deliveries waiting for one installation, oldest first (expired ones are left out).
    func pendingDeliveries(of slot: UInt32, now: Timestamp) -> [Delivery] {
        guard let platform = self.registry.platform(ofSlot: slot) else { return [] }
        let references = DeliveryReferences(project: self.id)
        let token = self.registry.tokenLocation(ofSlot: slot)
        if let token { references.keep(self.registry.tokenChunk(token.chunk)) }
        var result: [Delivery] = []
        self.deliveries.mailboxes.forEach(in: slot) { _, node in
            let facts = self.deliveries.facts[Int(node.entry)]
            if facts.expiry[platform] > now.millisecondsSinceEpoch {
                let id = node.isMarker ? DeliveryID(markerOf: facts.sequence, slot: slot) : DeliveryID(messageSequence: facts.sequence, slot: slot)
                let messageIndex = node.isMarker ? Delivery.noMessage : references.add(self.deliveries.entries[Int(node.entry)]!.rendered)
                result.append(self.delivery(
                    id: id, slot: slot, facts: facts, token: token, platform: platform, references: references, messageIndex: messageIndex,
                    isInFlight: node.isInFlight
                ))
            }
            return true
        }
        return result
    }

    /// The delivery `id` to the installation in `slot`, of a message with `facts`, held by
    /// `references` (with its token's chunk) at `messageIndex`.
    func delivery(
        id: DeliveryID, slot: UInt32, facts: MessageFacts, token: TokenLocation?, platform: Platform, references: DeliveryReferences,
        messageIndex: UInt32, isInFlight: Bool
    ) -> Delivery {
        Delivery(
            id: id,
            fid: self.registry.fid(ofSlot: slot)!,
            token: token,
            apnsToken: platform == .ios ? self.registry.apnsToken(ofSlot: slot) : nil,
            platform: platform,
            expiry: Timestamp(millisecondsSinceEpoch: facts.expiry[platform]),
            references: references,
            messageIndex: messageIndex,
            isInFlight: isInFlight
        )
    }
}
