extension ProjectState {
    /// In debug builds, after every delivery operation: each mailbox's count and marker flag match
    /// its nodes, each message's reference count matches the nodes naming it, and each consumer
    /// holds what its count says: the nodes in flight under its holder number (each in its
    /// hand-out list) and its orphans.
    func checkDeliveryInvariants() {
        #if FANOUT_INTERNAL_CHECKS
        self.deliveries.mailboxes.checkInvariants()
        var heldNodes = [UInt32: Int]()
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
            self.deliveries.mailboxes.forEach(in: slot) { index, node in
                let entry = self.deliveries.entries[Int(node.entry)]!
                references[Int(node.entry)] += 1
                if node.isInFlight { heldNodes[self.deliveries.mailboxes.holder(of: index), default: 0] += 1 }
                if node.isMarker { markers += 1 } else if entry.countsTowardPendingLimit(on: platform) { counted += 1 }
                return true
            }
            precondition(counted == Int(head.counted), "slot \(slot) counts \(head.counted), holds \(counted)")
            precondition(markers <= 1 && (markers == 1) == (head.flags & MailboxTable.Head.hasMarker != 0), "slot \(slot) marker flag")
        }
        for (index, entry) in self.deliveries.entries.enumerated() {
            precondition((entry?.references ?? 0) == references[index], "message entry \(index) references")
        }
        for consumer in self.deliveries.consumers.byID.values {
            let holding = self.deliveries.consumers.holdings[Int(consumer.holder)]
            let listed = holding.handedOut.count { self.isHeld($0, by: consumer.holder) }
            let nodes = heldNodes.removeValue(forKey: consumer.holder) ?? 0
            precondition(listed == nodes, "consumer \(consumer.id) holds \(nodes) nodes, lists \(listed)")
            precondition(consumer.held == nodes + holding.orphans.count, "consumer \(consumer.id) counts \(consumer.held) held")
        }
        precondition(heldNodes.isEmpty, "nodes held by no consumer: \(heldNodes)")
        #endif
    }
}
