public import FanoutModel

/// REGISTER's fields as they travel: strings, checked by the server with the engine's rules.
///
/// A decoder holds what it could parse already (`Decoded`): an offered FID as a `FID`, and a
/// register batch's valid tokens and app ids as bytes kept in one block the frame's items share,
/// so that the server registers them without a `String` each. The properties read and write the
/// text either way.
public struct RegistrationFields: Hashable, Sendable {
    // `Optional<T>`, not `T?`: see `RegistrationRequest`.
    public var offeredFID: String? {
        get { self.offered?.text }
        set { self.offered = newValue.map { .text($0) } }
    }
    package var offered: Optional<OfferedFID>
    public var token: String? {
        get { self.heldToken?.text }
        set { self.heldToken = newValue.map { .text($0) } }
    }
    package var heldToken: Optional<Decoded<RegistrationToken>>
    public var platform: Platform
    public var appID: String {
        get { self.heldAppID.text }
        set { self.heldAppID = .text(newValue) }
    }
    package var heldAppID: Decoded<AppID>
    public var deviceName: Optional<String>
    public var deviceOS: Optional<String>
    public var deviceType: Optional<String>
    /// Hex, iOS only.
    public var apnsToken: Optional<String>

    public init(
        offeredFID: String? = nil,
        token: String? = nil,
        platform: Platform,
        appID: String,
        deviceName: String? = nil,
        deviceOS: String? = nil,
        deviceType: String? = nil,
        apnsToken: String? = nil
    ) {
        self.init(
            offered: offeredFID.map { .text($0) }, token: token.map { .text($0) }, platform: platform, appID: .text(appID),
            deviceName: deviceName, deviceOS: deviceOS, deviceType: deviceType, apnsToken: apnsToken
        )
    }

    /// Fields as a decoder holds them.
    package init(
        offered: OfferedFID?,
        token: Decoded<RegistrationToken>?,
        platform: Platform,
        appID: Decoded<AppID>,
        deviceName: String?,
        deviceOS: String?,
        deviceType: String?,
        apnsToken: String?
    ) {
        self.offered = offered
        self.heldToken = token
        self.platform = platform
        self.heldAppID = appID
        self.deviceName = deviceName
        self.deviceOS = deviceOS
        self.deviceType = deviceType
        self.apnsToken = apnsToken
    }
}

/// One item of REGISTER_BATCH's reply, in input order.
public enum RegistrationOutcome: Hashable, Sendable {
    case registered(RegistrationResult)
    /// The item was refused (the others were not): what REGISTER would have answered.
    case failed(FanoutError)
}

/// What an ATTACH consumes.
public enum AttachScope: Hashable, Sendable {
    /// A delivery worker for every installation of the platform.
    case platform(Platform)
    /// A device consumer of these installations (FIDs or tokens).
    case installations([String])
}

/// What an AUDIENCE request counts: a topic's subscribers, a condition's installations, or a
/// user's devices.
public enum AudienceTarget: Hashable, Sendable {
    case topic(String)
    case condition(String)
    case user(String)
}

/// A delivery as a consumer receives it (DELIVERY frames, PENDING replies).
public struct WireDelivery: Hashable, Sendable {
    public var id: DeliveryID
    public var fid: FID
    /// Where to push it: the installation's registration token (absent only in PENDING listings
    /// of an installation that has none). A delivery from a DELIVERIES frame holds a token whose
    /// bytes a block its frame's deliveries share keeps (`RegistrationToken(keptIn:)`): no
    /// `String` per delivery.
    public var token: RegistrationToken?
    /// For iOS installations that gave one, the APNs device token.
    public var apnsToken: APNsDeviceToken?
    public var platform: Platform
    public var expiry: Timestamp
    /// Held by a consumer unacknowledged (PENDING replies only).
    public var isInFlight: Bool
    /// FCM's "deleted messages" marker rather than a message.
    public var isDeletedMessagesMarker: Bool
    /// The headers to send with the payload: `apns-priority`, `apns-push-type`,
    /// `apns-expiration`, `apns-collapse-id`, `apns-topic` for iOS; `TTL`, `Urgency`, `Topic` for
    /// web push; none for Android (its payload carries them) and for the marker.
    public var headers: [DeliveryHeader]
    /// What the platform receives: the APNs body, the Android message or the web push payload.
    public var payload: [UInt8]

    public init(
        id: DeliveryID,
        fid: FID,
        token: RegistrationToken?,
        apnsToken: APNsDeviceToken? = nil,
        platform: Platform,
        expiry: Timestamp,
        isInFlight: Bool,
        isDeletedMessagesMarker: Bool,
        headers: [DeliveryHeader] = [],
        payload: [UInt8]
    ) {
        self.id = id
        self.fid = fid
        self.token = token
        self.apnsToken = apnsToken
        self.platform = platform
        self.expiry = expiry
        self.isInFlight = isInFlight
        self.isDeletedMessagesMarker = isDeletedMessagesMarker
        self.headers = headers
        self.payload = payload
    }

    /// Calls `body` with the registration token's bytes, read in place (no `String` made); nil
    /// when the delivery has no token.
    public func withTokenBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result? {
        try self.token?.withUTF8(body)
    }

    /// Makes this its group's delivery to one recipient (DELIVERIES decoding).
    mutating func setRecipient(slot: UInt32, fid: FID, token: RegistrationToken?, apnsToken: APNsDeviceToken?) {
        self.id = DeliveryID(messageSequence: self.id.messageSequence, slot: slot)
        self.fid = fid
        self.token = token
        self.apnsToken = apnsToken
    }
}

/// SEND's reply.
public struct SendReceipt: Hashable, Sendable {
    /// `projects/{project}/messages/{sequence}`, or `fake_message_id` for `validate_only`.
    public var messageID: String
    public var sequence: UInt64
    public var audience: UInt32
    public var enqueued: UInt32
    /// One per recipient for token, FID and multicast targets, with the reason of each refusal.
    public var recipients: [RecipientResult]
    /// Per platform: the rendered size against its limit, and the recipients queued, refused,
    /// skipped and collapsed.
    public var platforms: [PlatformSendReport]

    public init(messageID: String, sequence: UInt64, audience: UInt32, enqueued: UInt32, recipients: [RecipientResult], platforms: [PlatformSendReport] = []) {
        self.messageID = messageID
        self.sequence = sequence
        self.audience = audience
        self.enqueued = enqueued
        self.recipients = recipients
        self.platforms = platforms
    }
}

/// STATS's reply: the project's installation count and delivery counters, and what the server's
/// write-ahead log has done since it opened (engine-wide; zeros for an in-memory engine).
public struct ProjectStatistics: Hashable, Sendable {
    public var installations: UInt64
    public var deliveries: DeliveryStatistics
    public var log: WALStatistics
    /// The server's connections (all projects).
    public var connections: ConnectionStatistics

    public init(installations: UInt64, deliveries: DeliveryStatistics, log: WALStatistics = WALStatistics(), connections: ConnectionStatistics = ConnectionStatistics()) {
        self.installations = installations
        self.deliveries = deliveries
        self.log = log
        self.connections = connections
    }
}

/// What the server did with its connections since it started (docs/security.md).
public struct ConnectionStatistics: Hashable, Sendable {
    /// Connections accepted.
    public var accepted: UInt64 = 0
    /// Closed at once: too many connections had not finished HELLO.
    public var refusedOverPendingLimit: UInt64 = 0
    /// Closed for not finishing HELLO (and TLS) in time.
    public var handshakeTimeouts: UInt64 = 0
    /// HELLOs refused as UNAUTHENTICATED.
    public var authenticationFailures: UInt64 = 0
    /// Of those, answered late because their address had failed shortly before.
    public var delayedAuthentications: UInt64 = 0

    public init() {}
}

/// One LIST_TOPICS entry.
public struct TopicCount: Hashable, Sendable {
    public var topic: String
    public var subscribers: UInt64

    public init(topic: String, subscribers: UInt64) {
        self.topic = topic
        self.subscribers = subscribers
    }
}

/// One user in LIST_USERS's reply.
public struct UserSummary: Hashable, Sendable {
    public var id: String
    public var isAnonymous: Bool
    public var createdAt: Timestamp
    public var lastActive: Timestamp
    /// How many devices are bound to it.
    public var devices: Int

    public init(id: String, isAnonymous: Bool, createdAt: Timestamp, lastActive: Timestamp, devices: Int) {
        self.id = id
        self.isAnonymous = isAnonymous
        self.createdAt = createdAt
        self.lastActive = lastActive
        self.devices = devices
    }
}
