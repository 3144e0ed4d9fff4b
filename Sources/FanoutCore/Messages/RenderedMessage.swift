/// A validated message with its per-platform payloads rendered once, shared (by reference) by
/// every delivery of the send.
public final class RenderedMessage: Sendable {
    public static let apnsLimit = 4096
    public static let apnsVoIPLimit = 5120
    public static let webpushLimit = 4096

    public let message: Message
    /// When the message was accepted; expiries count from here.
    public let acceptedAt: Timestamp
    /// The APNs request body (JSON).
    public let apnsBody: [UInt8]
    /// The Android payload: `{"data":{...},"notification":{...}}` plus delivery options.
    public let androidPayload: [UInt8]
    /// The web push payload (before RFC 8291 encryption).
    public let webpushPayload: [UInt8]

    /// Renders `message` for every platform.
    public init(_ message: Message, acceptedAt: Timestamp) {
        self.message = message
        self.acceptedAt = acceptedAt
        self.apnsBody = JSONWriter.encode(.object(APNSPayload.render(message)))
        self.androidPayload = JSONWriter.encode(.object(Self.renderAndroid(message)))
        self.webpushPayload = JSONWriter.encode(.object(Self.renderWebpush(message)))
    }

    /// The rendered payload for a platform.
    public func payload(for platform: Platform) -> [UInt8] {
        switch platform {
        case .ios: return self.apnsBody
        case .android: return self.androidPayload
        case .web: return self.webpushPayload
        }
    }

    /// The size limit of a platform's rendered payload, if it has one: APNs 4096 (VoIP 5120), web 4096.
    /// Android has none beyond FCM's own data and notification limit.
    public func limit(for platform: Platform) -> Int? {
        switch platform {
        case .ios: return self.message.apns?.header("apns-push-type") == "voip" ? Self.apnsVoIPLimit : Self.apnsLimit
        case .android: return nil
        case .web: return Self.webpushLimit
        }
    }

    /// Whether the platform's rendered payload fits its limit (recipients on a platform where it
    /// does not get `INVALID_ARGUMENT`; the others are delivered).
    public func fits(_ platform: Platform) -> Bool {
        guard let limit = self.limit(for: platform) else { return true }
        return self.payload(for: platform).count <= limit
    }

    /// When a delivery to `platform` expires: Android's `ttl` (default 28 days); APNs'
    /// `apns-expiration` (0: at once; default 30 days); web push's `TTL` header (default: the
    /// Android TTL or 28 days).
    public func expiry(for platform: Platform) -> Timestamp {
        let ttl = self.message.android?.ttlSeconds ?? MessageParser.maximumTTLSeconds
        switch platform {
        case .android:
            return self.acceptedAt.advanced(by: .seconds(ttl))
        case .ios:
            if let header = self.message.apns?.header("apns-expiration"), let seconds = UInt64(header) {
                if seconds == 0 { return self.acceptedAt }
                return Timestamp(millisecondsSinceEpoch: Int64(clamping: seconds).multipliedReportingOverflow(by: 1000).partialValue)
            }
            return self.acceptedAt.advanced(by: .seconds(30 * 86_400))
        case .web:
            if let header = self.message.webpush?.header("ttl"), let seconds = UInt32(header) {
                return self.acceptedAt.advanced(by: .seconds(Int64(seconds)))
            }
            return self.acceptedAt.advanced(by: .seconds(ttl))
        }
    }

    /// The collapse key of deliveries to `platform`, if the message is collapsible there.
    public func collapseKey(for platform: Platform) -> String? {
        switch platform {
        case .android: return self.message.android?.collapseKey
        case .ios: return self.message.apns?.header("apns-collapse-id")
        case .web: return self.message.webpush?.header("topic")
        }
    }

    // MARK: - Rendering

    private static func stringObject(_ pairs: [(key: String, value: String)]) -> JSONValue {
        .object(JSONObject(pairs.map { .init(key: $0.key, value: .string($0.value)) }))
    }

    /// `base` overridden key by key by `overrides`, in order of first appearance.
    private static func merged(_ base: [(key: String, value: String)], _ overrides: [(key: String, value: String)]?) -> [(key: String, value: String)] {
        guard let overrides, !overrides.isEmpty else { return base }
        var result = base
        for (key, value) in overrides {
            if let index = result.firstIndex(where: { $0.key == key }) {
                result[index].value = value
            } else {
                result.append((key, value))
            }
        }
        return result
    }

    private static func notificationObject(_ notification: Message.Notification?, overrides: JSONObject?) -> JSONObject? {
        var object = JSONObject()
        if let notification {
            for (key, value) in [("title", notification.title), ("body", notification.body), ("image", notification.image)] {
                if let value { object.members.append(.init(key: key, value: .string(value))) }
            }
        }
        for member in overrides?.members ?? [] {
            if let index = object.members.firstIndex(where: { $0.key == member.key }) {
                object.members[index].value = member.value
            } else {
                object.members.append(member)
            }
        }
        return object.members.isEmpty ? nil : object
    }

    /// `{"data":{...},"notification":{...}}` with a platform's data and notification overrides
    /// applied (either member left out when empty): how Android and web payloads start.
    private static func dataAndNotification(
        _ message: Message,
        dataOverrides: [(key: String, value: String)]?,
        notificationOverrides: JSONObject?
    ) -> JSONObject {
        var payload = JSONObject()
        let data = self.merged(message.data, dataOverrides)
        if !data.isEmpty { payload.members.append(.init(key: "data", value: self.stringObject(data))) }
        if let notification = self.notificationObject(message.notification, overrides: notificationOverrides) {
            payload.members.append(.init(key: "notification", value: .object(notification)))
        }
        return payload
    }

    private static func renderAndroid(_ message: Message) -> JSONObject {
        var payload = self.dataAndNotification(
            message,
            dataOverrides: message.android?.data,
            notificationOverrides: message.android?.notification
        )
        if let android = message.android {
            if let key = android.collapseKey { payload.members.append(.init(key: "collapse_key", value: .string(key))) }
            if let priority = android.priority { payload.members.append(.init(key: "priority", value: .string(priority.rawValue))) }
            if let ttl = android.ttlSeconds { payload.members.append(.init(key: "ttl", value: .string("\(ttl)s"))) }
        }
        return payload
    }

    private static func renderWebpush(_ message: Message) -> JSONObject {
        var payload = self.dataAndNotification(
            message,
            dataOverrides: message.webpush?.data,
            notificationOverrides: message.webpush?.notification
        )
        if let link = message.webpush?.link {
            payload.members.append(.init(key: "fcm_options", value: .object(JSONObject([.init(key: "link", value: .string(link))]))))
        }
        return payload
    }
}
