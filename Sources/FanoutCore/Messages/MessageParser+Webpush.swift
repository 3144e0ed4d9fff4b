extension MessageParser {
    enum WebpushField: Int, ProtoField {
        case headers, data, notification, fcmOptions
        typealias Values = InlineArray<4, Int32>
        static let table = FieldTable(Self.self)
    }

    enum WebpushFCMOptionsField: Int, ProtoField {
        case link, analyticsLabel
        typealias Values = InlineArray<2, Int32>
        static let table = FieldTable(Self.self)
    }

    /// The web push headers with rules, by name in any case.
    private enum WebpushHeader: Int {
        case ttl, urgency, topic
        static let names = HeaderNames<Self>(["ttl", "urgency", "topic"])
    }

    private static let urgencies: [StaticString] = ["very-low", "low", "normal", "high"]
    /// The Web Notification fields that must be strings.
    private static let webNotificationStrings: [StaticString] = ["title", "body", "icon", "badge", "image", "tag", "lang"]

    /// `webpush`: the headers routing reads go to `options`, the overrides and link to `parts`.
    static func webpush(
        _ reader: ObjectReader<WebpushField>,
        parts: inout Message.Parts,
        options: inout Message.DeliveryOptions,
        violations: inout Violations
    ) {
        let document = reader.document
        if let headers = reader.stringMap(.headers, violations: &violations) {
            self.checkWebpushHeaders(document, headers, options: &options, violations: &violations)
            parts.webpushHeaders = headers
        }
        if let data = reader.stringMap(.data, violations: &violations) {
            self.checkDataKeys(document, data, at: reader.path(of: .data), violations: &violations)
            parts.webpushData = data
        }
        if let notification = reader.jsonObject(.notification, violations: &violations) {
            let path = "message.webpush.notification"
            for member in document.members(of: notification) {
                let value = member.value
                if document.string(at: member.key, isOneOf: ["dir", "direction"]) {
                    if !document.string(at: value, isOneOf: ["auto", "ltr", "rtl"]) {
                        violations.add("\(path).dir", "must be auto, ltr or rtl")
                    }
                } else if document.kind(of: value) != .string, let key = self.webNotificationStrings.first(where: { document.string(at: member.key, equals: $0) }) {
                    violations.add("\(path).\(key)", "expected a string, got \(document.typeName(of: value))")
                }
            }
            parts.webpushNotification = notification
        }
        if let fcmOptions = reader.object(.fcmOptions, as: WebpushFCMOptionsField.self, at: "message.webpush.fcm_options", violations: &violations) {
            if let link = fcmOptions.string(.link, violations: &violations) {
                let isHTTPS = document.withStringBytes(at: link) { $0.count > 8 && ASCII.hasPrefix($0, "https://") }
                if isHTTPS {
                    parts.webpushLink = link
                } else {
                    violations.add(fcmOptions.path(of: .link), "must be an HTTPS URL")
                }
            }
            self.checkAnalyticsLabel(fcmOptions, .analyticsLabel, violations: &violations)
        }
    }

    /// RFC 8030's `TTL`, `Urgency` and `Topic` headers (names in any case); the first of each sets `options`.
    private static func checkWebpushHeaders(
        _ document: JSONDocument,
        _ headers: Int,
        options: inout Message.DeliveryOptions,
        violations: inout Violations
    ) {
        for member in document.members(of: headers) {
            var field: String { "message.webpush.headers.\(Violations.printable(document.string(at: member.key) ?? ""))" }
            let value = member.value
            switch document.withStringBytes(at: member.key, WebpushHeader.names.header(named:)) {
            case .ttl:
                if let seconds = document.withStringBytes(at: value, { ASCII.decimal($0, maximumDigits: 10) }), let ttl = UInt32(exactly: seconds) {
                    options.webpushTTLSeconds = options.webpushTTLSeconds ?? ttl
                } else {
                    violations.add(field, "must be a non-negative number of seconds")
                }
            case .urgency:
                if document.string(at: value, isOneOf: self.urgencies) {
                    options.webpushUrgency = options.webpushUrgency ?? document.string(at: value)
                } else {
                    violations.add(field, "must be very-low, low, normal or high")
                }
            case .topic:
                // RFC 8030: at most 32 characters of the URL-safe base64 alphabet.
                let valid = document.withStringBytes(at: value) { topic in
                    (1...32).contains(topic.count) && topic.allSatisfy { ASCII.isAlphanumeric($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") }
                }
                if valid {
                    options.webpushTopic = options.webpushTopic ?? document.string(at: value)
                } else {
                    violations.add(field, "must be 1...32 characters of [A-Za-z0-9_-]")
                }
            case nil:
                break
            }
        }
    }
}
