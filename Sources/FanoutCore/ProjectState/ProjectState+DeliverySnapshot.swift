/// Messages in the log and in snapshots: replaying a send, restoring a snapshot's pending
/// deliveries, and writing them.
extension ProjectState {
    /// Parses and renders a send body logged by an older build (record types 19 and 22), as it was
    /// when it was accepted at `at`. Newer logs store the rendered message and never come here.
    static func renderLogged(_ body: [UInt8], at: Timestamp) throws(FanoutError) -> RenderedMessage {
        do {
            return RenderedMessage(try MessageParser.parseSendRequest(body).message, acceptedAt: at, staleCutoff: nil, webpushTTLDefault: nil)
        } catch {
            throw FanoutError(.internal, "replay: a logged message no longer validates: \(error.message)")
        }
    }

    /// Replays a logged send through the same enqueueing as a new one, at the time it was accepted.
    mutating func replaySend(_ message: RenderedMessage, sequence: UInt64) throws(FanoutError) {
        guard sequence >= self.deliveries.nextSequence else {
            throw FanoutError(.internal, "replay: message \(sequence) logged after \(self.deliveries.nextSequence - 1)")
        }
        _ = self.enqueueMessage(message, sequence: sequence, now: message.acceptedAt)
    }

    /// Restores a snapshot's message with its pending deliveries and markers, appended in
    /// ascending sequence order as the snapshot lists them, so every mailbox keeps its order.
    mutating func restoreMessage(_ rendered: RenderedMessage, sequence: UInt64, slots: [UInt32], markerSlots: [UInt32]) throws(FanoutError) {
        guard sequence >= self.deliveries.nextSequence else {
            throw FanoutError(.internal, "replay: message \(sequence) restored out of order")
        }
        let markers = Set(markerSlots)
        let audience = SlotSet(slots + markerSlots)
        guard audience.count == slots.count + markerSlots.count else {
            throw FanoutError(.internal, "replay: message \(sequence) has a delivery and a marker in one mailbox")
        }
        let index = self.deliveries.add(MessageEntry(sequence: sequence, rendered: rendered, audience: audience))
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
                .restoreMessage(self.id, sequence: entry.sequence, message: entry.rendered, slots: pending, markerSlots: markers)
            )
        }
        records.append(.restoreMessageSequence(self.id, next: self.deliveries.nextSequence))
        return records
    }
}
