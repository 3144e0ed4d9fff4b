/// A validated FCM v1 message. Construct it with `MessageParser`; it has passed the rules of
/// fcm-rules.md sections 3, 4 and 9. It keeps the send body and its parsed form, and renders its
/// payloads from them (`RenderedMessage`); what routing needs is typed (`target`, `options`).
public struct Message: Sendable {
    /// Whom the message is for: FCM's four targets plus the engine's own (`user`, multicast).
    public enum Target: Hashable, Sendable, CustomStringConvertible {
        case token(RegistrationToken)
        case fid(FID)
        case topic(TopicName)
        case condition(Condition)
        /// Every device of a user (an engine target).
        case user(UserID)
        /// Up to 500 tokens and FIDs (an engine target; FCM's SDKs send these one by one).
        case multicast([RegistrationAddress])

        /// The field of the first legacy Instance ID the target names (`message.fid`,
        /// `message.fids[i]`), if it names one.
        public var legacyInstanceIDField: String? {
            switch self {
            case .fid(let fid): return fid.isLegacyInstanceID ? "message.fid" : nil
            case .multicast(let addresses):
                var fids = 0
                for address in addresses {
                    guard case .fid(let fid) = address else { continue }
                    if fid.isLegacyInstanceID { return "message.fids[\(fids)]" }
                    fids += 1
                }
                return nil
            default: return nil
            }
        }

        /// `token`, `fid`, `topic`, `condition`, `user` or `multicast`.
        public var kind: String {
            switch self {
            case .token: return "token"
            case .fid: return "fid"
            case .topic: return "topic"
            case .condition: return "condition"
            case .user: return "user"
            case .multicast: return "multicast"
            }
        }

        /// Topic and condition messages have the smaller 2048-byte payload limit.
        public var isFanout: Bool {
            switch self {
            case .topic, .condition: return true
            default: return false
            }
        }

        /// The request field of each recipient of a token, FID or multicast target by position:
        /// `message.token`, `message.fid`, `message.tokens[i]`, `message.fids[i]` (a multicast
        /// lists its tokens first).
        var recipientFields: (Int) -> String {
            switch self {
            case .token: return { _ in "message.token" }
            case .fid: return { _ in "message.fid" }
            case .multicast(let addresses):
                let tokens = addresses.firstIndex { if case .fid = $0 { return true } else { return false } } ?? addresses.count
                return { $0 < tokens ? "message.tokens[\($0)]" : "message.fids[\($0 - tokens)]" }
            default: return { _ in "message" }
            }
        }

        /// FCM's limit on data and notification bytes: 2048 to a topic or condition, 4096 otherwise.
        public var payloadLimit: Int { self.isFanout ? 2048 : 4096 }

        /// Redacted for tokens.
        public var description: String {
            switch self {
            case .token(let token): return token.description
            case .fid(let fid): return fid.string
            case .topic(let topic): return topic.value
            case .condition(let condition): return condition.description
            case .user(let user): return user.value
            case .multicast(let addresses): return "\(addresses.count) registrations"
            }
        }
    }

    /// `notification`: the basic notification shown on every platform.
    public struct Notification: Hashable, Sendable {
        public var title: String?
        public var body: String?
        public var image: String?

        public init(title: String? = nil, body: String? = nil, image: String? = nil) {
            self.title = title
            self.body = body
            self.image = image
        }
    }

    /// What routing and delivery read from the platform configs, typed once at validation.
    public struct DeliveryOptions: Hashable, Sendable {
        public enum AndroidPriority: String, Sendable { case normal, high }

        /// `android.priority`.
        public var androidPriority: AndroidPriority?
        /// `android.ttl` in whole seconds, 0...2419200; `nil` means the default of 28 days.
        public var androidTTLSeconds: Int64?
        /// `android.collapse_key`.
        public var androidCollapseKey: String?
        /// The `apns-priority` header: 10, 5 or 1.
        public var apnsPriority: Int?
        /// The `apns-push-type` header (`alert`, `background`, `voip`, ...).
        public var apnsPushType: String?
        /// The `apns-expiration` header: a UNIX time in seconds, 0 for "now or never".
        public var apnsExpiration: UInt64?
        /// The `apns-collapse-id` header.
        public var apnsCollapseID: String?
        /// The `apns-topic` header (the app's bundle id).
        public var apnsTopic: String?
        /// Whether the APNs body shows nothing (only `content-available`): a background push, sent
        /// with push type `background` and priority 5 unless the headers say otherwise.
        public var apnsIsBackground = false
        /// The web push `TTL` header, in seconds.
        public var webpushTTLSeconds: UInt32?
        /// The web push `Topic` header (RFC 8030: replaces a pending message with the same topic).
        public var webpushTopic: String?
        /// The web push `Urgency` header: `very-low`, `low`, `normal` or `high`.
        public var webpushUrgency: String?
        /// Installations last seen before this are skipped (stale): set by the engine from a
        /// send's `SendOptions`, never from the JSON.
        public var skipLastSeenBefore: Timestamp?

        /// No option given.
        public init() {}
    }

    /// Where the parts rendering reads sit in `source`: document entries, `nil` when not given.
    /// Four bytes each: a message is copied as it is returned and handed on.
    struct Parts {
        @EntryIndex var data: Int?
        @EntryIndex var title: Int?
        @EntryIndex var body: Int?
        @EntryIndex var image: Int?
        @EntryIndex var androidData: Int?
        @EntryIndex var androidNotification: Int?
        @EntryIndex var apnsHeaders: Int?
        @EntryIndex var apnsPayload: Int?
        /// `apns.payload.aps`, and which of its keys rendering decides on were given (validation
        /// reads them as it checks them).
        @EntryIndex var apnsAPS: Int?
        var apsKeys: APSKeys = []
        @EntryIndex var apnsImage: Int?
        @EntryIndex var webpushHeaders: Int?
        @EntryIndex var webpushData: Int?
        @EntryIndex var webpushNotification: Int?
        @EntryIndex var webpushLink: Int?

        struct APSKeys: OptionSet {
            let rawValue: UInt8
            static let alert = APSKeys(rawValue: 1 << 0)
            static let badge = APSKeys(rawValue: 1 << 1)
            static let sound = APSKeys(rawValue: 1 << 2)
            static let mutableContent = APSKeys(rawValue: 1 << 3)
            static let contentAvailable = APSKeys(rawValue: 1 << 4)
        }
    }

    /// An optional document entry in four bytes (entries number fewer than half the input's
    /// bytes, and the input is under 4 GiB).
    @propertyWrapper
    struct EntryIndex {
        private var raw = UInt32.max

        init() {}

        var wrappedValue: Int? {
            get { self.raw == .max ? nil : Int(self.raw) }
            set { self.raw = newValue.map { UInt32(truncatingIfNeeded: $0) } ?? .max }
        }
    }

    public let target: Target
    public let options: DeliveryOptions
    /// The bytes counted against FCM's payload limit: every key and value of `data`, and of
    /// `notification` (`title`, `body`, `image`), in UTF-8.
    public let payloadBytes: Int
    /// The send body as received, parsed: the message is rendered from it.
    let source: StoredJSON
    let parts: Parts

    /// FCM's limit for this message: 2048 bytes to a topic or condition, 4096 otherwise.
    public var payloadLimit: Int { self.target.payloadLimit }

    /// `data`, decoded (on each call).
    public var data: [(key: String, value: String)] { self.stringMap(self.parts.data) }

    /// `notification`, decoded (on each call).
    public var notification: Notification? {
        let parts = self.parts
        guard parts.title != nil || parts.body != nil || parts.image != nil else { return nil }
        return self.source.withDocument { document in
            Notification(
                title: parts.title.flatMap(document.string(at:)),
                body: parts.body.flatMap(document.string(at:)),
                image: parts.image.flatMap(document.string(at:))
            )
        }
    }

    /// `apns.headers`, decoded (on each call).
    public var apnsHeaders: [(key: String, value: String)] { self.stringMap(self.parts.apnsHeaders) }

    /// `webpush.headers`, decoded (on each call).
    public var webpushHeaders: [(key: String, value: String)] { self.stringMap(self.parts.webpushHeaders) }

    private func stringMap(_ object: Int?) -> [(key: String, value: String)] {
        guard let object else { return [] }
        return self.source.withDocument { document in
            document.members(of: object).map { (document.string(at: $0.key) ?? "", document.string(at: $0.value) ?? "") }
        }
    }
}

/// A send request: `{"validate_only": ..., "message": {...}}`.
public struct SendRequest: Sendable {
    public var validateOnly: Bool
    public var message: Message
}
