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
