/// A validated FCM v1 message. Construct it with `MessageParser`; every field here has passed the
/// rules of fcm-rules.md sections 3, 4 and 9.
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

        /// The field names, in the order FCM renders them.
        static let fieldNames = ["title", "body", "image"]

        /// The value of field `name` (one of `fieldNames`), if set.
        func value(of name: String) -> String? {
            switch name {
            case "title": return self.title
            case "body": return self.body
            case "image": return self.image
            default: return nil
            }
        }
    }

    /// What `android` holds, validated. Free-form parts are kept as JSON for rendering.
    public struct AndroidConfig: Sendable {
        public enum Priority: String, Sendable { case normal, high }

        public var collapseKey: String?
        public var priority: Priority?
        /// Whole seconds, 0...2419200; `nil` means the default of 28 days.
        public var ttlSeconds: Int64?
        public var restrictedPackageName: String?
        public var data: [(key: String, value: String)]?
        /// The validated `android.notification` object, as given.
        public var notification: JSONObject?
        public var analyticsLabel: String?
        public var directBootOK: Bool?
        public var bandwidthConstrainedOK: Bool?
        public var restrictedSatelliteOK: Bool?
    }

    /// What `apns` holds, validated.
    public struct APNSConfig: Sendable {
        public var headers: [(key: String, value: String)]
        /// The validated `apns.payload` object (`aps` and custom keys), as given.
        public var payload: JSONObject?
        public var analyticsLabel: String?
        public var image: String?
        public var liveActivityToken: String?

        /// A header's value, if given (names are case-insensitive, as in HTTP).
        public func header(_ name: String) -> String? {
            self.headers.first { ASCII.equalsIgnoringCase($0.key, name) }?.value
        }
    }

    /// What `webpush` holds, validated.
    public struct WebpushConfig: Sendable {
        public var headers: [(key: String, value: String)]
        public var data: [(key: String, value: String)]?
        /// The validated `webpush.notification` object (Web Notification fields), as given.
        public var notification: JSONObject?
        public var link: String?
        public var analyticsLabel: String?

        public func header(_ name: String) -> String? {
            self.headers.first { ASCII.equalsIgnoringCase($0.key, name) }?.value
        }
    }

    public var target: Target
    public var data: [(key: String, value: String)]
    public var notification: Notification?
    public var android: AndroidConfig?
    public var apns: APNSConfig?
    public var webpush: WebpushConfig?
    /// `fcm_options.analytics_label`.
    public var analyticsLabel: String?

    /// The bytes counted against FCM's payload limit: every key and value of `data`, and of
    /// `notification` (`title`, `body`, `image`), in UTF-8.
    public var payloadBytes: Int {
        var total = self.data.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
        if let notification = self.notification {
            for name in Notification.fieldNames {
                if let value = notification.value(of: name) { total += name.utf8.count + value.utf8.count }
            }
        }
        return total
    }

    /// FCM's limit for this message: 2048 bytes to a topic or condition, 4096 otherwise.
    public var payloadLimit: Int { self.target.isFanout ? 2048 : 4096 }
}

/// A send request: `{"validate_only": ..., "message": {...}}`.
public struct SendRequest: Sendable {
    public var validateOnly: Bool
    public var message: Message
}
