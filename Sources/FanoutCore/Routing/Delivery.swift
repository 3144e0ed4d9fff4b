/// A message waiting for one installation, as a consumer receives it or `pendingDeliveries` lists
/// it: everything a delivery worker needs to push it with no other lookup (the destination, the
/// push service's headers, the rendered payload). The rendered message is shared by every delivery
/// of the send; nothing here is a copy of it.
public struct Delivery: Sendable {
    /// The payload of the "deleted messages" marker that replaces a mailbox's non-collapsible
    /// messages when more than 100 were pending (FCM's `onDeletedMessages`).
    public static let deletedMessagesPayload: [UInt8] = Array(#"{"message_type":"deleted_messages"}"#.utf8)

    public var id: DeliveryID
    public var project: ProjectID
    public var fid: FID
    /// The installation's registration token when the delivery was handed out, if it had one, in
    /// place in the engine's storage.
    public var storedToken: StoredToken?
    /// The installation's APNs device token, if it is an iOS installation that gave one.
    public var apnsToken: APNsDeviceToken?
    public var platform: Platform
    /// When the delivery expires (from the message's TTL or `apns-expiration` for this platform).
    public var expiry: Timestamp
    /// The message, or `nil` for the "deleted messages" marker.
    public var message: RenderedMessage?
    /// Whether a consumer holds it unacknowledged (only in `pendingDeliveries` listings).
    public var isInFlight: Bool

    /// The installation's registration token when the delivery was handed out (a copy of
    /// `storedToken`'s bytes).
    public var token: RegistrationToken? { self.storedToken?.token }

    /// `projects/{project}/messages/{sequence}`; `nil` for the "deleted messages" marker.
    public var messageID: String? { self.id.messageNumber.map { SendResult.messageID(project: self.project, sequence: $0) } }

    /// Whether this is the "deleted messages" marker rather than a message.
    public var isDeletedMessagesMarker: Bool { self.message == nil }

    /// The headers to send with the payload (`RenderedMessage.headers(for:)`); none for the marker.
    @inlinable  // (read in place by the frame writer: a call across modules copied the delivery)
    public var headers: [DeliveryHeader] {
        self.message?.headers(for: self.platform) ?? []
    }

    /// What the platform receives: the rendered APNs body, Android payload or web push payload.
    @inlinable
    public var payload: [UInt8] {
        self.message?.payload(for: self.platform) ?? Self.deletedMessagesPayload
    }
}
