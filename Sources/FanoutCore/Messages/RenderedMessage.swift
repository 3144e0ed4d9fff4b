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
        self.apnsBody = APNSPayload.render(message)
        self.androidPayload = Self.renderAndroid(message)
        self.webpushPayload = Self.renderWebpush(message)
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

    /// Writes `"data":{...}` and `"notification":{...}` with a platform's overrides applied key by
    /// key (in order of first appearance), each left out when empty: how Android and web payloads start.
    static func writeDataAndNotification(
        _ message: Message,
        dataOverrides: [(key: String, value: String)]?,
        notificationOverrides: JSONObject?,
        to writer: inout JSONWriter
    ) {
        let overrides = dataOverrides ?? []
        if !message.data.isEmpty || !overrides.isEmpty {
            writer.key("data")
            writer.openObject()
            for (key, value) in message.data {
                writer.key(key)
                writer.write(string: overrides.first { $0.key == key }?.value ?? value)
            }
            for (key, value) in overrides where !message.data.contains(where: { $0.key == key }) {
                writer.key(key)
                writer.write(string: value)
            }
            writer.closeObject()
        }
        let notification = message.notification ?? Message.Notification()
        let notificationMembers = notificationOverrides?.members ?? []
        let names = Message.Notification.fieldNames
        guard names.contains(where: { notification.value(of: $0) != nil }) || !notificationMembers.isEmpty else { return }
        writer.key("notification")
        writer.openObject()
        for name in names {
            guard let value = notification.value(of: name) else { continue }
            writer.key(name)
            if let override = notificationMembers.first(where: { $0.key == name }) {
                writer.write(override.value)
            } else {
                writer.write(string: value)
            }
        }
        for member in notificationMembers where notification.value(of: member.key) == nil {
            writer.key(member.key)
            writer.write(member.value)
        }
        writer.closeObject()
    }

    /// `{"data":{...},"notification":{...}}` with `android`'s overrides, then its delivery options.
    private static func renderAndroid(_ message: Message) -> [UInt8] {
        var writer = JSONWriter(capacity: 1024)
        writer.openObject()
        let android = message.android
        self.writeDataAndNotification(message, dataOverrides: android?.data, notificationOverrides: android?.notification, to: &writer)
        if let android {
            if let key = android.collapseKey {
                writer.key("collapse_key")
                writer.write(string: key)
            }
            if let priority = android.priority {
                writer.key("priority")
                writer.write(string: priority.rawValue)
            }
            if let ttl = android.ttlSeconds {
                writer.key("ttl")
                writer.write(string: "\(ttl)s")
            }
        }
        writer.closeObject()
        return writer.bytes
    }

    /// `{"data":{...},"notification":{...}}` with `webpush`'s overrides, then `fcm_options.link`.
    private static func renderWebpush(_ message: Message) -> [UInt8] {
        var writer = JSONWriter(capacity: 1024)
        writer.openObject()
        let webpush = message.webpush
        self.writeDataAndNotification(message, dataOverrides: webpush?.data, notificationOverrides: webpush?.notification, to: &writer)
        if let link = webpush?.link {
            writer.key("fcm_options")
            writer.openObject()
            writer.key("link")
            writer.write(string: link)
            writer.closeObject()
        }
        writer.closeObject()
        return writer.bytes
    }
}
