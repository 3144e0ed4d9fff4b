extension ProjectState {
    /// In debug builds, after every delivery operation: each mailbox's count and marker flag match
    /// its nodes, each message's reference count matches the nodes naming it, and the nodes in
    /// flight are those the consumers hold.
    func checkDeliveryInvariants() {
        #if FANOUT_INTERNAL_CHECKS
        self.deliveries.mailboxes.checkInvariants()
        var inFlight = 0
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
                if node.isInFlight { inFlight += 1 }
                if node.isMarker { markers += 1 } else if entry.countsTowardPendingLimit(on: platform) { counted += 1 }
                return true
            }
            precondition(counted == Int(head.counted), "slot \(slot) counts \(head.counted), holds \(counted)")
            precondition(markers <= 1 && (markers == 1) == (head.flags & MailboxTable.Head.hasMarker != 0), "slot \(slot) marker flag")
        }
        for (index, entry) in self.deliveries.entries.enumerated() {
            precondition((entry?.references ?? 0) == references[index], "message entry \(index) references")
        }
        // Each held id still pending names a node in flight; no two consumers hold one id.
        var held = 0
        var heldByAnyone = Set<DeliveryID>()
        for consumer in self.deliveries.consumers.byID.values {
            for id in consumer.inFlight {
                precondition(heldByAnyone.insert(id).inserted, "\(id) is held twice")
                if let found = self.find(id) {
                    precondition(self.deliveries.mailboxes.node(found.index).isInFlight, "\(id) is held, its node waits")
                    held += 1
                }
            }
        }
        precondition(held == inFlight, "\(inFlight) nodes in flight, \(held) held")
        #endif
    }
}
