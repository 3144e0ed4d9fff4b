/// Names one delivery: the message (its per-project sequence number) and the installation slot it
/// waits for. A message reaches an installation at most once, so the pair is unique, and both
/// halves survive a restart (slots are kept by snapshots), so an id means the same delivery after
/// recovery. Written `<sequence>.<slot>`. Opaque to users beyond its message's sequence: hand it
/// back to acknowledge. The "deleted messages" marker has an id of its own: the sequence of the
/// send that overflowed the mailbox with bit 63 set (`isDeletedMessagesMarker`).
public struct DeliveryID: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The message's sequence number in its project (the `{id}` of `projects/{project}/messages/{id}`);
    /// for the marker, with `markerBit` set.
    public var messageSequence: UInt64
    /// The installation's slot in the engine (a storage detail, not an address).
    package var slot: UInt32

    package init(messageSequence: UInt64, slot: UInt32) {
        self.messageSequence = messageSequence
        self.slot = slot
    }

    /// Set in the sequence of a "deleted messages" marker's id (message sequences stay far below it).
    public static let markerBit: UInt64 = 1 << 63

    /// The id of the "deleted messages" marker that a send's overflow left in `slot`'s mailbox.
    package init(markerOf messageSequence: UInt64, slot: UInt32) {
        self.init(messageSequence: messageSequence | Self.markerBit, slot: slot)
    }

    /// Whether this names a "deleted messages" marker rather than a message's delivery.
    public var isDeletedMessagesMarker: Bool { self.messageSequence & Self.markerBit != 0 }

    /// The message id's number (`projects/{project}/messages/{number}`); `nil` for the marker,
    /// which is no message.
    public var messageNumber: UInt64? { self.isDeletedMessagesMarker ? nil : self.messageSequence }

    /// Parses `<sequence>.<slot>`.
    public init?(_ string: String) {
        let parts = string.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, let sequence = UInt64(parts[0]), let slot = UInt32(parts[1]) else { return nil }
        self.init(messageSequence: sequence, slot: slot)
    }

    public var description: String { "\(self.messageSequence).\(self.slot)" }

    public static func < (lhs: DeliveryID, rhs: DeliveryID) -> Bool {
        (lhs.messageSequence, lhs.slot) < (rhs.messageSequence, rhs.slot)
    }
}
