/// A validated message with its per-platform payloads rendered once, shared (by reference) by
/// every delivery of the send. It holds what routing and delivery read (the target, the delivery
/// options, the three payloads), not the request it came from: the log stores it as it is, and
/// replay rebuilds it without the message parser.
public final class RenderedMessage: Hashable, Sendable {
    public static let apnsLimit = 4096
    public static let apnsVoIPLimit = 5120
    public static let webpushLimit = 4096

    /// Whom the message is for.
    public let target: Message.Target
    /// The delivery options read from the platform configs.
    public let options: Message.DeliveryOptions
    /// When the message was accepted; expiries count from here.
    public let acceptedAt: Timestamp
    /// The APNs request body (JSON).
    public let apnsBody: [UInt8]
    /// The Android payload: `{"data":{...},"notification":{...}}` plus delivery options.
    public let androidPayload: [UInt8]
    /// The web push payload (before RFC 8291 encryption).
    public let webpushPayload: [UInt8]

    /// Renders `message` for every platform.
    public init(_ message: consuming Message, acceptedAt: Timestamp) {
        self.acceptedAt = acceptedAt
        (self.apnsBody, self.androidPayload, self.webpushPayload) = Self.render(message)
        self.target = message.target
        self.options = message.options
    }

    /// A message as it was rendered when it was accepted (from the log or a snapshot).
    package init(
        target: Message.Target,
        options: Message.DeliveryOptions,
        acceptedAt: Timestamp,
        apnsBody: [UInt8],
        androidPayload: [UInt8],
        webpushPayload: [UInt8]
    ) {
        self.target = target
        self.options = options
        self.acceptedAt = acceptedAt
        self.apnsBody = apnsBody
        self.androidPayload = androidPayload
        self.webpushPayload = webpushPayload
    }

    public static func == (lhs: RenderedMessage, rhs: RenderedMessage) -> Bool {
        lhs === rhs
            || (lhs.target == rhs.target && lhs.options == rhs.options && lhs.acceptedAt == rhs.acceptedAt
                && lhs.apnsBody == rhs.apnsBody && lhs.androidPayload == rhs.androidPayload && lhs.webpushPayload == rhs.webpushPayload)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.target)
        hasher.combine(self.acceptedAt)
        hasher.combine(self.apnsBody)
    }

    /// The APNs body, the Android payload and the web push payload.
    private static func render(_ message: Message) -> (apns: [UInt8], android: [UInt8], webpush: [UInt8]) {
        // One buffer for the three payloads (the thread's scratch), each copied out at its exact
        // size; it starts with room for the largest payload a platform accepts (it grows for one
        // it will refuse).
        ThreadScratch.withBytes(Self.apnsVoIPLimit) { scratch in
            message.source.withDocument { document in
                var writer = JSONWriter(scratch: scratch)
                APNSPayload.render(document, message.parts, to: &writer)
                let apnsBody = writer.bytes
                writer.removeAll()
                let androidStart = Self.renderAndroid(document, message, to: &writer)
                let androidPayload = writer.bytes
                writer.removeAll()
                // The web payload starts with the same bytes unless either platform overrides `data`.
                let sharesStart = message.parts.androidData == nil && message.parts.webpushData == nil
                Self.renderWebpush(document, message.parts, start: sharesStart ? androidPayload[..<androidStart] : nil, to: &writer)
                return (apnsBody, androidPayload, writer.bytes)
            }
        }
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
        case .ios: return self.options.apnsPushType == "voip" ? Self.apnsVoIPLimit : Self.apnsLimit
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
        let options = self.options
        let ttl = options.androidTTLSeconds ?? MessageParser.maximumTTLSeconds
        switch platform {
        case .android:
            return self.acceptedAt.advanced(by: .seconds(ttl))
        case .ios:
            if let seconds = options.apnsExpiration {
                if seconds == 0 { return self.acceptedAt }
                return Timestamp(millisecondsSinceEpoch: Int64(clamping: seconds).multipliedReportingOverflow(by: 1000).partialValue)
            }
            return self.acceptedAt.advanced(by: .seconds(30 * 86_400))
        case .web:
            if let seconds = options.webpushTTLSeconds {
                return self.acceptedAt.advanced(by: .seconds(Int64(seconds)))
            }
            return self.acceptedAt.advanced(by: .seconds(ttl))
        }
    }

    /// The collapse key of deliveries to `platform`, if the message is collapsible there.
    public func collapseKey(for platform: Platform) -> String? {
        switch platform {
        case .android: return self.options.androidCollapseKey
        case .ios: return self.options.apnsCollapseID
        case .web: return self.options.webpushTopic
        }
    }

    // MARK: - Rendering

    /// Writes `"data":{...}` with a platform's overrides applied key by key (in order of first
    /// appearance), left out when empty: how Android and web payloads start.
    static func writeData(_ document: JSONDocument, _ parts: Message.Parts, overrides dataOverrides: Int?, to writer: inout JSONWriter) {
        let data = parts.data.flatMap { document.isEmpty($0) ? nil : $0 }
        let overrides = dataOverrides.flatMap { document.isEmpty($0) ? nil : $0 }
        if let data, overrides == nil {
            writer.key(static: "data")
            writer.write(document, data)
        }
        guard let overrides else { return }
        writer.key(static: "data")
        writer.openObject()
        if let data {
            let overridden = MemberLookup(document, overrides, forKeysOf: data)
            for member in document.members(of: data) {
                writer.member(document, (member.key, overridden.member(withKeyEqualTo: member.key)?.value ?? member.value))
            }
        }
        let given = MemberLookup(document, data, forKeysOf: overrides)
        writer.members(document, of: overrides) { given.member(withKeyEqualTo: $0.key) == nil }
        writer.closeObject()
    }

    /// Writes `"notification":{...}` with a platform's overrides applied key by key, left out when
    /// empty. With `snakeCaseOverrides`, the overrides are proto3 fields (Android's), written under
    /// their snake_case names.
    static func writeNotification(
        _ document: JSONDocument,
        _ parts: Message.Parts,
        overrides notificationOverrides: Int?,
        snakeCaseOverrides: Bool,
        to writer: inout JSONWriter
    ) {
        let notificationOverrides = notificationOverrides.flatMap { document.isEmpty($0) ? nil : $0 }
        guard parts.title != nil || parts.body != nil || parts.image != nil || notificationOverrides != nil else { return }
        // The platform's title, body and image replace the message's (the names have no uppercase
        // letters: both spellings are the same); found in one pass, with an Android
        // `notification_count` given as a string, which is written as a number.
        var replacements: (title: (key: Int, value: Int)?, body: (key: Int, value: Int)?, image: (key: Int, value: Int)?)
        var countAsString: (key: Int, count: Int32)?
        if let notificationOverrides {
            for member in document.members(of: notificationOverrides) {
                if parts.title != nil, document.string(at: member.key, equals: "title") {
                    replacements.title = member
                } else if parts.body != nil, document.string(at: member.key, equals: "body") {
                    replacements.body = member
                } else if parts.image != nil, document.string(at: member.key, equals: "image") {
                    replacements.image = member
                } else if snakeCaseOverrides, document.kind(of: member.value) == .string,
                    document.string(at: member.key, equals: "notification_count") || document.string(at: member.key, equals: "notificationCount"),
                    let count = document.int32(at: member.value)
                {
                    countAsString = (member.key, count)
                }
            }
        }
        func write(_ name: StaticString, _ value: Int?, replacedBy replacement: (key: Int, value: Int)?, to writer: inout JSONWriter) {
            guard let value else { return }
            writer.member(static: name, document, replacement?.value ?? value)
        }
        writer.key(static: "notification")
        writer.openObject()
        write("title", parts.title, replacedBy: replacements.title, to: &writer)
        write("body", parts.body, replacedBy: replacements.body, to: &writer)
        write("image", parts.image, replacedBy: replacements.image, to: &writer)
        if let notificationOverrides {
            let isReplacement = { (key: Int) in key == replacements.title?.key || key == replacements.body?.key || key == replacements.image?.key }
            if let countAsString {
                // proto3 JSON admits an int32 as a string (`notification_count`); Android reads a number.
                for member in document.members(of: notificationOverrides) where !isReplacement(member.key) {
                    if member.key == countAsString.key {
                        writer.key(static: "notification_count")
                        writer.write(.number(JSONNumber(Int(countAsString.count))))
                    } else {
                        writer.member(document, member, snakeCaseKeys: snakeCaseOverrides)
                    }
                }
            } else {
                writer.members(document, of: notificationOverrides, snakeCaseKeys: snakeCaseOverrides) { !isReplacement($0.key) }
            }
        }
        writer.closeObject()
    }

    /// `{"data":{...},"notification":{...}}` with `android`'s overrides, then its delivery options;
    /// returns how many bytes the start (`{` and the data) took.
    private static func renderAndroid(_ document: JSONDocument, _ message: Message, to writer: inout JSONWriter) -> Int {
        let parts = message.parts
        writer.openObject()
        self.writeData(document, parts, overrides: parts.androidData, to: &writer)
        let start = writer.byteCount
        self.writeNotification(document, parts, overrides: parts.androidNotification, snakeCaseOverrides: true, to: &writer)
        let options = message.options
        if let key = options.androidCollapseKey {
            writer.key(static: "collapse_key")
            writer.write(string: key)
        }
        if let priority = options.androidPriority {
            writer.key(static: "priority")
            writer.write(static: priority == .high ? #""high""# : #""normal""#)
        }
        if let ttl = options.androidTTLSeconds {
            writer.key(static: "ttl")
            writer.write(durationSeconds: ttl)
        }
        writer.closeObject()
        return start
    }

    /// `{"data":{...},"notification":{...}}` with `webpush`'s overrides, then `fcm_options.link`;
    /// `start`, if given, is the `{` and data already rendered the same for Android.
    private static func renderWebpush(_ document: JSONDocument, _ parts: Message.Parts, start: ArraySlice<UInt8>?, to writer: inout JSONWriter) {
        if let start {
            writer.write(rendered: start)
        } else {
            writer.openObject()
            self.writeData(document, parts, overrides: parts.webpushData, to: &writer)
        }
        self.writeNotification(document, parts, overrides: parts.webpushNotification, snakeCaseOverrides: false, to: &writer)
        if let link = parts.webpushLink {
            writer.key(static: "fcm_options")
            writer.openObject()
            writer.key(static: "link")
            writer.write(document, link)
            writer.closeObject()
        }
        writer.closeObject()
    }
}
