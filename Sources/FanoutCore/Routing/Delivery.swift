/// A message waiting for one installation, as a consumer receives it or `pendingDeliveries` lists
/// it: everything a delivery worker needs to push it with no other lookup (the destination, the
/// push service's headers, the rendered payload). The rendered message is shared by every delivery
/// of the send; nothing here is a copy of it. The message and the token's bytes are held by the
/// batch the delivery was made in (`DeliveryReferences`): the delivery holds only that.
public struct Delivery: @unchecked Sendable {
    // Sendable: `tokenEntry` points into a chunk `references` keeps alive, whose bytes never change.

    /// The payload of the "deleted messages" marker that replaces a mailbox's non-collapsible
    /// messages when more than 100 were pending (FCM's `onDeletedMessages`).
    public static let deletedMessagesPayload: [UInt8] = Array(#"{"message_type":"deleted_messages"}"#.utf8)

    /// `messageIndex` of the "deleted messages" marker.
    @usableFromInline
    static let noMessage = UInt32.max

    // `Optional<T>`, not `T?`: see `RegistrationRequest`.
    public var id: DeliveryID
    public var fid: FID
    /// Where the registration token is in the engine's storage (kept alive by `references`), if
    /// the installation had one when the delivery was handed out: `tokenBytes(ofEntry:)` reads it.
    package private(set) var tokenEntry: Optional<UnsafeRawPointer>
    /// The installation's APNs device token, if it is an iOS installation that gave one.
    public var apnsToken: Optional<APNsDeviceToken>
    public var platform: Platform
    /// When the delivery expires (from the message's TTL or `apns-expiration` for this platform).
    public var expiry: Timestamp
    @usableFromInline
    private(set) var references: DeliveryReferences
    /// The message's index in `references.messages`, or `noMessage`.
    @usableFromInline
    private(set) var messageIndex: UInt32
    /// Whether a consumer holds it unacknowledged (only in `pendingDeliveries` listings).
    public var isInFlight: Bool

    init(
        id: DeliveryID, fid: FID, token: TokenLocation?, apnsToken: APNsDeviceToken?,
        platform: Platform, expiry: Timestamp, references: DeliveryReferences, messageIndex: UInt32, isInFlight: Bool
    ) {
        self.init(
            id: id, fid: fid, tokenEntry: token?.entry, apnsToken: apnsToken, platform: platform, expiry: expiry, references: references,
            messageIndex: messageIndex, isInFlight: isInFlight
        )
    }

    private init(
        id: DeliveryID, fid: FID, tokenEntry: UnsafeRawPointer?, apnsToken: consuming APNsDeviceToken?,
        platform: Platform, expiry: Timestamp, references: DeliveryReferences, messageIndex: UInt32, isInFlight: Bool
    ) {
        self.id = id
        self.fid = fid
        self.tokenEntry = tokenEntry
        self.apnsToken = apnsToken
        self.platform = platform
        self.expiry = expiry
        self.references = references
        self.messageIndex = messageIndex
        self.isInFlight = isInFlight
    }

    /// Initializes the delivery at `place` from a hand-out's fields.
    static func initialize(_ place: UnsafeMutablePointer<Delivery>, _ fields: HandedOut, apnsToken: consuming APNsDeviceToken?, references: DeliveryReferences) {
        place.initialize(to: Delivery(
            id: fields.id, fid: fields.fid, tokenEntry: fields.tokenEntry, apnsToken: apnsToken, platform: fields.platform, expiry: fields.expiry,
            references: references, messageIndex: fields.messageIndex, isInFlight: true
        ))
    }

    /// The project the delivery is of.
    public var project: ProjectID { self.references.project }

    /// The installation's registration token when the delivery was handed out, if it had one, in
    /// place in the engine's storage.
    public var storedToken: StoredToken? {
        self.tokenEntry.map(Self.tokenBytes(ofEntry:)).map { StoredToken(owner: self.references, start: $0.baseAddress!, count: $0.count) }
    }

    /// The bytes of the token at `tokenEntry`, valid while the delivery lives (read here, not when
    /// the delivery was made), for a caller that borrows the delivery in place (a frame writer): a
    /// getter called from another module copied the delivery to call it.
    package static func tokenBytes(ofEntry entry: UnsafeRawPointer) -> UnsafeRawBufferPointer {
        TokenArena.bytes(ofEntry: entry)
    }

    /// Asks the CPU for the token at `tokenEntry` ahead of `tokenBytes(ofEntry:)`, without waiting:
    /// the tokens of a hand-out lie wherever their installations registered.
    package static func prefetchToken(ofEntry entry: UnsafeRawPointer) {
        TokenArena.prefetch(entry: entry)
    }

    /// The installation's registration token when the delivery was handed out (a copy of
    /// `storedToken`'s bytes).
    public var token: RegistrationToken? { self.storedToken?.token }

    /// The message, or `nil` for the "deleted messages" marker.
    @inlinable
    public var message: RenderedMessage? {
        self.messageIndex == Self.noMessage ? nil : self.references.messages[Int(self.messageIndex)]
    }

    /// `projects/{project}/messages/{sequence}`; `nil` for the "deleted messages" marker.
    public var messageID: String? { self.id.messageNumber.map { SendResult.messageID(project: self.project, sequence: $0) } }

    /// Whether this is the "deleted messages" marker rather than a message.
    @inlinable
    public var isDeletedMessagesMarker: Bool { self.messageIndex == Self.noMessage }

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
