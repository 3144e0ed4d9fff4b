/// Parses and validates FCM HTTP v1 send bodies: `{"validate_only": bool, "message": {...}}` or a
/// bare message, in either proto3 JSON spelling, reporting every violation in one pass.
public enum MessageParser {
    /// The most registrations in a multicast target (FCM's SDK limit for tokens plus FIDs).
    public static let maximumMulticast = 500

    /// Parses one send body.
    /// - Throws: `MessageError` with every violation found (malformed JSON is one violation on `body`).
    public static func parseSendRequest(
        _ bytes: some Collection<UInt8>,
        limits: JSONParser.Limits = JSONParser.Limits()
    ) throws(MessageError) -> SendRequest {
        let outcome: (request: SendRequest?, violations: Violations)
        do {
            outcome = try JSONParser.withDocument(bytes, limits: limits) { document in
                var violations = Violations()
                return (self.sendRequest(document, violations: &violations), violations)
            }
        } catch {
            throw MessageError(violations: [FieldViolation(field: "body", description: error.description)])
        }
        guard outcome.violations.isEmpty, let request = outcome.request else { throw MessageError(violations: outcome.violations.all) }
        return request
    }

    static func sendRequest(_ document: JSONDocument, violations: inout Violations) -> SendRequest? {
        let root = JSONDocument.root
        guard document.kind(of: root) == .object else {
            violations.add("body", "expected a JSON object, got \(document.typeName(of: root))")
            return nil
        }
        let isEnvelope = document.members(of: root).contains {
            document.key(at: $0.key, isField: "message") || document.key(at: $0.key, isField: "validate_only")
        }
        guard isEnvelope else {
            return self.message(document, root, at: "message", violations: &violations).map { SendRequest(validateOnly: false, message: $0) }
        }
        guard var envelope = ObjectReader(document, root, at: "body", violations: &violations) else { return nil }
        let validateOnly = envelope.bool("validate_only", violations: &violations) ?? false
        let messageValue = envelope.take("message", violations: &violations)
        envelope.finish(violations: &violations)
        guard let messageValue else {
            violations.add("message", "is required")
            return nil
        }
        return self.message(document, messageValue, at: "message", violations: &violations)
            .map { SendRequest(validateOnly: validateOnly, message: $0) }
    }

    // MARK: - Message

    static func message(_ document: JSONDocument, _ index: Int, at path: String, violations: inout Violations) -> Message? {
        guard var reader = ObjectReader(document, index, at: path, violations: &violations) else { return nil }
        let target = self.target(&reader, violations: &violations)
        _ = reader.take("name", violations: &violations)  // output only; ignored as FCM does
        let data = reader.stringMap("data", violations: &violations) ?? []
        self.checkDataKeys(data, at: reader.field("data"), violations: &violations)
        let notification = reader.read("notification", violations: &violations, with: Self.notification(_:violations:))
        let android = reader.read("android", violations: &violations, with: Self.android(_:violations:))
        let apns = reader.read("apns", violations: &violations, with: Self.apns(_:violations:))
        let webpush = reader.read("webpush", violations: &violations, with: Self.webpush(_:violations:))
        let analyticsLabel = reader.read("fcm_options", violations: &violations) { options, violations in
            defer { options.finish(violations: &violations) }
            return Self.analyticsLabel(&options, violations: &violations)
        } ?? nil
        reader.finish(violations: &violations)
        guard let target else { return nil }
        let message = Message(
            target: target,
            data: data,
            notification: notification,
            android: android,
            apns: apns,
            webpush: webpush,
            analyticsLabel: analyticsLabel
        )
        if message.payloadBytes > message.payloadLimit {
            violations.add(
                path,
                "Message too big: data and notification are \(message.payloadBytes) bytes, over the limit of "
                    + "\(message.payloadLimit) bytes for \(target.isFanout ? "topic and condition" : "\(target.kind)") messages"
            )
        }
        if let apns, let violation = APNSPayload.dataOnlyPriorityViolation(message: message, apns: apns) {
            violations.add("\(path).apns.headers.apns-priority", violation)
        }
        return message
    }

    // MARK: - Target

    private static func target(_ reader: inout ObjectReader, violations: inout Violations) -> Message.Target? {
        var targets: [(String, Message.Target?)] = []
        if let value = reader.string("token", violations: &violations) {
            let token = RegistrationToken(value)
            if token == nil { violations.add(reader.field("token"), "The registration token is not a valid FCM registration token") }
            targets.append(("token", token.map(Message.Target.token)))
        }
        if let value = reader.string("fid", violations: &violations) {
            let fid = FID(value)
            if fid == nil { violations.add(reader.field("fid"), "not a valid Firebase Installation ID") }
            targets.append(("fid", fid.map(Message.Target.fid)))
        }
        if let value = reader.string("topic", violations: &violations) {
            let topic = TopicName(value)
            if topic == nil { violations.add(reader.field("topic"), "Malformed topic name: expected [a-zA-Z0-9-_.~%]{1,900}") }
            targets.append(("topic", topic.map(Message.Target.topic)))
        }
        if let value = reader.string("condition", violations: &violations) {
            do {
                targets.append(("condition", .condition(try Condition(parsing: value))))
            } catch {
                violations.add(reader.field("condition"), error.message)
                targets.append(("condition", nil))
            }
        }
        if let value = reader.string("user", violations: &violations) {
            let user = UserID(value)
            if user == nil { violations.add(reader.field("user"), "expected 1...128 bytes of visible ASCII") }
            targets.append(("user", user.map(Message.Target.user)))
        }
        let tokens = reader.strings("tokens", violations: &violations)
        let fids = reader.strings("fids", violations: &violations)
        if tokens != nil || fids != nil {
            var addresses: [RegistrationAddress] = []
            for (index, value) in (tokens ?? []).enumerated() {
                if let token = RegistrationToken(value) {
                    addresses.append(.token(token))
                } else {
                    violations.add("\(reader.field("tokens"))[\(index)]", "The registration token is not a valid FCM registration token")
                }
            }
            for (index, value) in (fids ?? []).enumerated() {
                if let fid = FID(value) {
                    addresses.append(.fid(fid))
                } else {
                    violations.add("\(reader.field("fids"))[\(index)]", "not a valid Firebase Installation ID")
                }
            }
            let total = (tokens?.count ?? 0) + (fids?.count ?? 0)
            if total == 0 {
                violations.add(reader.field("tokens"), "a multicast needs at least one token or FID")
            } else if total > self.maximumMulticast {
                violations.add(reader.field("tokens"), "Total number of tokens and fids must not exceed \(self.maximumMulticast), got \(total)")
            }
            targets.append(("tokens", addresses.count == total && total <= self.maximumMulticast ? .multicast(addresses) : nil))
        }
        guard targets.count == 1 else {
            violations.add(
                reader.path,
                targets.isEmpty
                    ? "Recipient of the message is not set: exactly one of token, fid, topic, condition, user or tokens/fids is required"
                    : "Exactly one of token, fid, topic, condition, user or tokens/fids may be set, got \(targets.map(\.0).joined(separator: ", "))"
            )
            return nil
        }
        return targets[0].1
    }

    // MARK: - Data, notification, options

    /// Reserved keys: `from`, `message_type`, and anything starting with `google` or `gcm`, any case.
    static func checkDataKeys(_ data: [(key: String, value: String)], at path: @autoclosure () -> String, violations: inout Violations) {
        for (key, _) in data {
            let utf8 = key.utf8
            func isReserved(_ word: StaticString, wholeKey: Bool) -> Bool {
                let count = word.utf8CodeUnitCount
                guard wholeKey ? utf8.count == count : utf8.count >= count else { return false }
                return word.withUTF8Buffer { expected in
                    zip(utf8.prefix(count), expected).allSatisfy { ASCII.lowercased($0) == $1 }
                }
            }
            if isReserved("from", wholeKey: true) || isReserved("message_type", wholeKey: true)
                || isReserved("google", wholeKey: false) || isReserved("gcm", wholeKey: false)
            {
                violations.add("\(path()).\(ObjectReader.printable(key))", "Invalid data key: \"\(ObjectReader.printable(key))\" is reserved")
            }
        }
    }

    private static func notification(_ reader: inout ObjectReader, violations: inout Violations) -> Message.Notification {
        let notification = Message.Notification(
            title: reader.string("title", violations: &violations),
            body: reader.string("body", violations: &violations),
            image: reader.string("image", violations: &violations)
        )
        reader.finish(violations: &violations)
        return notification
    }

    /// `analytics_label`: `^[a-zA-Z0-9-_.~%]{1,50}$`.
    static func analyticsLabel(_ reader: inout ObjectReader, violations: inout Violations) -> String? {
        guard let label = reader.string("analytics_label", violations: &violations) else { return nil }
        guard label.utf8.count <= 50, TopicName.isValid(label.utf8) else {
            violations.add(reader.field("analytics_label"), "Malformed analytics_label: expected [a-zA-Z0-9-_.~%]{1,50}")
            return nil
        }
        return label
    }

    // MARK: - Shared formats

    /// A protobuf Duration string, `"<seconds>[.<up to 9 digits>]s"`, non-negative; whole seconds (rounded down).
    static func durationSeconds(_ text: String) -> Int64? {
        var bytes = Array(text.utf8)
        guard bytes.last == UInt8(ascii: "s") else { return nil }
        bytes.removeLast()
        let parts = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count <= 2, let whole = parts.first, !whole.isEmpty, whole.count <= 12,
            whole.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
        else { return nil }
        if parts.count == 2 {
            let fraction = parts[1]
            guard !fraction.isEmpty, fraction.count <= 9,
                fraction.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
            else { return nil }
        }
        return Int64(String(decoding: whole, as: UTF8.self))
    }

    /// RFC 3339: `YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM)`.
    static func isRFC3339(_ text: String) -> Bool {
        let b = Array(text.utf8)
        func digits(_ range: Range<Int>) -> Int? {
            guard range.upperBound <= b.count else { return nil }
            var value = 0
            for index in range {
                guard b[index] >= UInt8(ascii: "0"), b[index] <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int(b[index] - UInt8(ascii: "0"))
            }
            return value
        }
        guard b.count >= 20, digits(0..<4) != nil, b[4] == UInt8(ascii: "-"), let month = digits(5..<7),
            b[7] == UInt8(ascii: "-"), let day = digits(8..<10), b[10] == UInt8(ascii: "T") || b[10] == UInt8(ascii: "t"),
            let hour = digits(11..<13), b[13] == UInt8(ascii: ":"), let minute = digits(14..<16),
            b[16] == UInt8(ascii: ":"), let second = digits(17..<19),
            (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second <= 60
        else { return false }
        var index = 19
        if b[index] == UInt8(ascii: ".") {
            index += 1
            let start = index
            while index < b.count, b[index] >= UInt8(ascii: "0"), b[index] <= UInt8(ascii: "9") { index += 1 }
            guard index > start, index - start <= 9 else { return false }
        }
        guard index < b.count else { return false }
        if b[index] == UInt8(ascii: "Z") || b[index] == UInt8(ascii: "z") { return index == b.count - 1 }
        guard b[index] == UInt8(ascii: "+") || b[index] == UInt8(ascii: "-"), b.count == index + 6,
            let offsetHours = digits(index + 1..<index + 3), b[index + 3] == UInt8(ascii: ":"),
            let offsetMinutes = digits(index + 4..<index + 6)
        else { return false }
        return offsetHours < 24 && offsetMinutes < 60
    }

    /// `#RRGGBB`.
    static func isHexColor(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        return bytes.count == 7 && bytes[0] == UInt8(ascii: "#") && bytes.dropFirst().allSatisfy(ASCII.isHexDigit)
    }
}
