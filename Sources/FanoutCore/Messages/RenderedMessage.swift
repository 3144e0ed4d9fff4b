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
    /// The headers of iOS and web deliveries (`headers(for:)`), made once per message.
    private let apnsHeaders: [DeliveryHeader]
    private let webpushHeaders: [DeliveryHeader]

    /// Renders `message` for every platform. A send that skips stale installations gives the
    /// time before which an installation's last sighting makes it stale.
    public convenience init(_ message: consuming Message, acceptedAt: Timestamp, skippingLastSeenBefore staleCutoff: Timestamp? = nil) {
        self.init(message, acceptedAt: acceptedAt, staleCutoff: staleCutoff, webpushTTLDefault: UInt32(MessageParser.maximumTTLSeconds))
    }

    /// `webpushTTLDefault` is FCM's web push default (4 weeks), made explicit in what is logged;
    /// `nil` only for a send body logged by an older build, whose web deliveries expired by
    /// `android.ttl` and still do (`expiry(for:)`).
    init(_ message: consuming Message, acceptedAt: Timestamp, staleCutoff: Timestamp?, webpushTTLDefault: UInt32?) {
        self.acceptedAt = acceptedAt
        (self.apnsBody, self.androidPayload, self.webpushPayload) = Self.render(message)
        self.target = message.target
        var options = message.options
        options.skipLastSeenBefore = staleCutoff
        options.webpushTTLSeconds = options.webpushTTLSeconds ?? webpushTTLDefault
        self.options = options
        (self.apnsHeaders, self.webpushHeaders) = Self.headers(options, acceptedAt: acceptedAt)
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
        (self.apnsHeaders, self.webpushHeaders) = Self.headers(options, acceptedAt: acceptedAt)
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
    /// `apns-expiration` (0: at once; default 30 days); web push's `TTL` header (default 4 weeks,
    /// as FCM: `android.ttl` does not apply to web push; a message logged by an older build without
    /// the header keeps the `android.ttl` it expired by then).
    public func expiry(for platform: Platform) -> Timestamp {
        Self.expiry(for: platform, self.options, acceptedAt: self.acceptedAt)
    }

    private static func expiry(for platform: Platform, _ options: Message.DeliveryOptions, acceptedAt: Timestamp) -> Timestamp {
        switch platform {
        case .android:
            return acceptedAt.advanced(by: .seconds(options.androidTTLSeconds ?? MessageParser.maximumTTLSeconds))
        case .ios:
            if let seconds = options.apnsExpiration {
                if seconds == 0 { return acceptedAt }
                return Timestamp(millisecondsSinceEpoch: Int64(clamping: seconds).multipliedReportingOverflow(by: 1000).partialValue)
            }
            return acceptedAt.advanced(by: .seconds(30 * 86_400))
        case .web:
            return acceptedAt.advanced(by: .seconds(Self.webpushTTL(options)))
        }
    }

    /// Web push's TTL in seconds: the `TTL` header (always set on messages rendered now), or for a
    /// message logged without it, `android.ttl` or 4 weeks, as older builds expired it.
    private static func webpushTTL(_ options: Message.DeliveryOptions) -> Int64 {
        options.webpushTTLSeconds.map(Int64.init) ?? options.androidTTLSeconds ?? MessageParser.maximumTTLSeconds
    }

    /// The headers a worker sends with a delivery to `platform`'s push service, as FCM sends them:
    /// for iOS `apns-priority` (given, or 10; 5 for a background push), `apns-push-type` (given, or
    /// `alert`; `background` for a background push), `apns-expiration` (given, or the delivery's
    /// expiry in UNIX seconds), then `apns-collapse-id` and `apns-topic` when given; for web push
    /// `TTL` (given, or 4 weeks), then `Urgency` and `Topic` when given. None for Android, whose
    /// payload carries its priority, TTL and collapse key.
    public func headers(for platform: Platform) -> [DeliveryHeader] {
        switch platform {
        case .ios: return self.apnsHeaders
        case .android: return []
        case .web: return self.webpushHeaders
        }
    }

    private static func headers(_ options: Message.DeliveryOptions, acceptedAt: Timestamp) -> (apns: [DeliveryHeader], webpush: [DeliveryHeader]) {
        let background = options.apnsIsBackground
        let expiration = options.apnsExpiration ?? UInt64(max(0, self.expiry(for: .ios, options, acceptedAt: acceptedAt).millisecondsSinceEpoch / 1000))
        // Sized for all five at once: appending to a literal of three grew it (an allocation more
        // per send when a collapse id or topic was given).
        var apns: [DeliveryHeader] = []
        apns.reserveCapacity(5)
        apns.append(DeliveryHeader(name: "apns-priority", value: String(options.apnsPriority ?? (background ? 5 : 10))))
        apns.append(DeliveryHeader(name: "apns-push-type", value: options.apnsPushType ?? (background ? "background" : "alert")))
        apns.append(DeliveryHeader(name: "apns-expiration", value: String(expiration)))
        if let collapseID = options.apnsCollapseID { apns.append(DeliveryHeader(name: "apns-collapse-id", value: collapseID)) }
        if let topic = options.apnsTopic { apns.append(DeliveryHeader(name: "apns-topic", value: topic)) }
        var webpush = [DeliveryHeader(name: "TTL", value: String(Self.webpushTTL(options)))]
        if let urgency = options.webpushUrgency { webpush.append(DeliveryHeader(name: "Urgency", value: urgency)) }
        if let topic = options.webpushTopic { webpush.append(DeliveryHeader(name: "Topic", value: topic)) }
        return (apns, webpush)
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
