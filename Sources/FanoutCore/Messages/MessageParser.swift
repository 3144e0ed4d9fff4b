/// Parses and validates FCM HTTP v1 send bodies: `{"validate_only": bool, "message": {...}}` or a
/// bare message, in either proto3 JSON spelling, reporting every violation in one pass.
public enum MessageParser {
    /// The most registrations in a multicast target (FCM's SDK limit for tokens plus FIDs).
    public static let maximumMulticast = 500

    /// Parses one send body.
    /// - Throws: `MessageError` with every violation found (malformed JSON is one violation on `body`).
    public static func parseSendRequest(_ bytes: some Collection<UInt8>) throws(MessageError) -> SendRequest {
        try self.parseSendRequest(bytes as? [UInt8] ?? Array(bytes), limits: JSONParser.Limits())
    }

    /// Parses one send body; the message keeps `input` (no copy).
    /// - Throws: `MessageError` with every violation found (malformed JSON is one violation on `body`).
    public static func parseSendRequest(_ input: [UInt8]) throws(MessageError) -> SendRequest {
        try self.parseSendRequest(input, limits: JSONParser.Limits())
    }

    /// Parses one send body under the given parser limits (tests of the limits).
    package static func parseSendRequest(_ bytes: some Collection<UInt8>, limits: JSONParser.Limits) throws(MessageError) -> SendRequest {
        try self.parseSendRequest(bytes as? [UInt8] ?? Array(bytes), limits: limits)
    }

    package static func parseSendRequest(_ input: [UInt8], limits: JSONParser.Limits) throws(MessageError) -> SendRequest {
        let outcome: Result<SendRequest, MessageError>
        do {
            outcome = try JSONParser.withDocument(input, limits: limits) { document in
                var violations = Violations()
                let request = self.sendRequest(document, source: input, violations: &violations)
                guard violations.isEmpty, let request else { return .failure(MessageError(violations: violations.all)) }
                return .success(request)
            }
        } catch {
            throw MessageError(violations: [FieldViolation(field: "body", description: error.description)])
        }
        // Consumed, not copied: a message is moved out of the layers it is returned through.
        switch consume outcome {
        case .success(let request): return request
        case .failure(let error): throw error
        }
    }

    static func sendRequest(_ document: JSONDocument, source: [UInt8], violations: inout Violations) -> SendRequest? {
        let root = JSONDocument.root
        guard document.kind(of: root) == .object else {
            violations.add("body", "expected a JSON object, got \(document.typeName(of: root))")
            return nil
        }
        let isEnvelope = document.members(of: root).contains { member in
            EnvelopeField.table.field(ofKey: member.key, in: document) != nil
        }
        guard isEnvelope else {
            return self.message(document, root, source: source, violations: &violations).map { SendRequest(validateOnly: false, message: $0) }
        }
        guard let envelope = ObjectReader<EnvelopeField>(document, root, at: "body", violations: &violations) else { return nil }
        let validateOnly = envelope.bool(.validateOnly, violations: &violations) ?? false
        guard let message = envelope.value(.message) else {
            violations.add("message", "is required")
            return nil
        }
        return self.message(document, message, source: source, violations: &violations)
            .map { SendRequest(validateOnly: validateOnly, message: $0) }
    }

    // MARK: - Message

    enum EnvelopeField: Int, ProtoField {
        case validateOnly, message
        typealias Values = InlineArray<2, Int32>
        static let table = FieldTable(Self.self)
    }

    enum MessageBodyField: Int, ProtoField {
        case name, token, fid, topic, condition, user, tokens, fids, data, notification, android, apns, webpush, fcmOptions
        typealias Values = InlineArray<14, Int32>
        static let table = FieldTable(Self.self)
    }

    enum NotificationField: Int, ProtoField {
        case title, body, image
        typealias Values = InlineArray<3, Int32>
        static let table = FieldTable(Self.self)
    }

    /// `fcm_options` of the message and of `android`.
    enum FCMOptionsField: Int, ProtoField {
        case analyticsLabel
        typealias Values = InlineArray<1, Int32>
        static let table = FieldTable(Self.self)
    }

    /// Validates the message at `index`; returns it only when it has no violation.
    static func message(_ document: JSONDocument, _ index: Int, source: [UInt8], violations: inout Violations) -> Message? {
        guard let reader = ObjectReader<MessageBodyField>(document, index, at: "message", violations: &violations) else { return nil }
        let target = self.target(reader, violations: &violations)
        _ = reader.value(.name)  // output only; ignored as FCM does
        var parts = Message.Parts()
        var options = Message.DeliveryOptions()
        var payloadBytes = 0
        if let data = reader.stringMap(.data, violations: &violations) {
            self.checkDataKeys(document, data, at: reader.path(of: .data), violations: &violations)
            parts.data = data
            for member in document.members(of: data) {
                payloadBytes += document.stringLength(at: member.key) + document.stringLength(at: member.value)
            }
        }
        if let notification = reader.object(.notification, as: NotificationField.self, at: "message.notification", violations: &violations) {
            parts.title = notification.string(.title, violations: &violations)
            parts.body = notification.string(.body, violations: &violations)
            parts.image = notification.string(.image, violations: &violations)
            for field in NotificationField.allCases {
                if let value = notification.value(field) {
                    payloadBytes += NotificationField.table.names[field.rawValue].utf8.count + document.stringLength(at: value)
                }
            }
        }
        if let android = reader.object(.android, as: AndroidField.self, at: "message.android", violations: &violations) {
            self.android(android, parts: &parts, options: &options, violations: &violations)
        }
        if let apns = reader.object(.apns, as: APNSField.self, at: "message.apns", violations: &violations) {
            self.apns(apns, parts: &parts, options: &options, violations: &violations)
        }
        if let webpush = reader.object(.webpush, as: WebpushField.self, at: "message.webpush", violations: &violations) {
            self.webpush(webpush, parts: &parts, options: &options, violations: &violations)
        }
        if let fcmOptions = reader.object(.fcmOptions, as: FCMOptionsField.self, at: "message.fcm_options", violations: &violations) {
            self.checkAnalyticsLabel(fcmOptions, .analyticsLabel, violations: &violations)
        }
        guard let target else { return nil }
        let limit = target.payloadLimit
        if payloadBytes > limit {
            violations.add(
                "message",
                "Message too big: data and notification are \(payloadBytes) bytes, over the limit of "
                    + "\(limit) bytes for \(target.isFanout ? "topic and condition" : "\(target.kind)") messages"
            )
        }
        if options.apnsPriority == 10, !APNSPayload.isVisible(parts) {
            // Apple: priority 10 "is an error" for a push that contains only `content-available`;
            // FCM requires 5 for data-only messages to iOS.
            violations.add("message.apns.headers.apns-priority", "a data-only (background) message to iOS must use apns-priority 5, not 10")
        }
        guard violations.isEmpty else { return nil }
        options.apnsIsBackground = !APNSPayload.isVisible(parts)
        return Message(target: target, options: options, payloadBytes: payloadBytes, source: StoredJSON(bytes: source, document: document), parts: parts)
    }

    // MARK: - Target

    private static let singleTargets: [MessageBodyField] = [.token, .fid, .topic, .condition, .user]

    private static func target(_ reader: ObjectReader<MessageBodyField>, violations: inout Violations) -> Message.Target? {
        let document = reader.document
        // A target counts when its JSON type is right (a wrong type is its own violation).
        var count = 0
        var chosen = MessageBodyField.tokens
        for field in self.singleTargets where reader.string(field, violations: &violations) != nil {
            count += 1
            chosen = field
        }
        let tokens = reader.value(.tokens).flatMap { document.kind(of: $0) == .array ? $0 : nil }
        let fids = reader.value(.fids).flatMap { document.kind(of: $0) == .array ? $0 : nil }
        if tokens != nil || fids != nil { count += 1 }
        guard count == 1 else {
            var given = self.singleTargets.filter { reader.value($0).map { document.kind(of: $0) == .string } ?? false }
            if tokens != nil || fids != nil { given.append(.tokens) }
            violations.add(
                "message",
                given.isEmpty
                    ? "Recipient of the message is not set: exactly one of token, fid, topic, condition, user or tokens/fids is required"
                    : "Exactly one of token, fid, topic, condition, user or tokens/fids may be set, got "
                        + given.map { MessageBodyField.table.names[$0.rawValue] }.joined(separator: ", ")
            )
            _ = reader.strings(.tokens, violations: &violations)
            _ = reader.strings(.fids, violations: &violations)
            return nil
        }
        let field = chosen
        if field == .tokens { return self.multicast(reader, tokens: tokens, fids: fids, violations: &violations) }
        let value = reader.decodedString(field, violations: &violations) ?? ""
        switch field {
        case .token:
            guard let token = RegistrationToken(value) else {
                violations.add(reader.path(of: .token), "The registration token is not a valid FCM registration token")
                return nil
            }
            return .token(token)
        case .fid:
            // A legacy Instance ID parses here; the project decides whether it accepts one (`Engine.Changes.send`).
            guard let fid = FID(value, allowingLegacy: true) else {
                violations.add(reader.path(of: .fid), "not a valid Firebase Installation ID")
                return nil
            }
            return .fid(fid)
        case .topic:
            guard let topic = TopicName(value) else {
                violations.add(reader.path(of: .topic), "Malformed topic name: expected [a-zA-Z0-9-_.~%]{1,900}")
                return nil
            }
            return .topic(topic)
        case .condition:
            do {
                return .condition(try Condition(parsing: value))
            } catch {
                violations.add(reader.path(of: .condition), error.message)
                return nil
            }
        case .user:
            guard let user = UserID(value) else {
                violations.add(reader.path(of: .user), "expected 1...128 bytes of visible ASCII")
                return nil
            }
            return .user(user)
        default:
            return nil  // .tokens, above; nothing else is a target
        }
    }

    /// `tokens` and `fids` (engine targets): together 1...500 valid registrations.
    private static func multicast(
        _ reader: ObjectReader<MessageBodyField>,
        tokens: Int?,
        fids: Int?,
        violations: inout Violations
    ) -> Message.Target? {
        let document = reader.document
        var addresses: [RegistrationAddress] = []
        var total = 0
        var valid = true
        for (field, array) in [(MessageBodyField.tokens, tokens), (.fids, fids)] {
            guard let array else { continue }
            for (index, element) in document.elements(of: array).enumerated() {
                guard let value = document.string(at: element) else {
                    violations.add("\(reader.path(of: field))[\(index)]", "expected a string, got \(document.typeName(of: element))")
                    valid = false
                    continue
                }
                total += 1
                if field == .tokens, let token = RegistrationToken(value) {
                    addresses.append(.token(token))
                } else if field == .fids, let fid = FID(value, allowingLegacy: true) {
                    addresses.append(.fid(fid))
                } else {
                    violations.add(
                        "\(reader.path(of: field))[\(index)]",
                        field == .tokens ? "The registration token is not a valid FCM registration token" : "not a valid Firebase Installation ID"
                    )
                    valid = false
                }
            }
        }
        if total == 0 {
            violations.add(reader.path(of: .tokens), "a multicast needs at least one token or FID")
        } else if total > self.maximumMulticast {
            violations.add(reader.path(of: .tokens), "Total number of tokens and fids must not exceed \(self.maximumMulticast), got \(total)")
        }
        return valid && total > 0 && total <= self.maximumMulticast ? .multicast(addresses) : nil
    }

    // MARK: - Data, options

    /// Reserved keys: `from`, `message_type`, and anything starting with `google` or `gcm`, any case.
    static func checkDataKeys(_ document: JSONDocument, _ data: Int, at path: @autoclosure () -> String, violations: inout Violations) {
        for member in document.members(of: data) where document.withStringBytes(at: member.key, self.isReservedDataKey) {
            let key = Violations.printable(document.string(at: member.key) ?? "")
            violations.add("\(path()).\(key)", "Invalid data key: \"\(key)\" is reserved")
        }
    }

    private static func isReservedDataKey(_ key: UnsafeBufferPointer<UInt8>) -> Bool {
        func matches(_ word: StaticString, wholeKey: Bool) -> Bool {
            let count = word.utf8CodeUnitCount
            guard wholeKey ? key.count == count : key.count >= count else { return false }
            return word.withUTF8Buffer { expected in (0..<count).allSatisfy { ASCII.lowercased(key[$0]) == expected[$0] } }
        }
        return matches("from", wholeKey: true) || matches("message_type", wholeKey: true)
            || matches("google", wholeKey: false) || matches("gcm", wholeKey: false)
    }

    /// `analytics_label`: `^[a-zA-Z0-9-_.~%]{1,50}$`.
    static func checkAnalyticsLabel<Field>(_ reader: ObjectReader<Field>, _ field: Field, violations: inout Violations) {
        guard let label = reader.string(field, violations: &violations) else { return }
        let valid = reader.document.withStringBytes(at: label) { $0.count <= 50 && TopicName.isValid($0) }
        if !valid {
            violations.add(reader.path(of: field), "Malformed analytics_label: expected [a-zA-Z0-9-_.~%]{1,50}")
        }
    }

    // MARK: - Shared formats

    /// A protobuf Duration string, `"<seconds>[.<up to 9 digits>]s"`, non-negative; whole seconds (rounded down).
    static func durationSeconds(_ text: UnsafeBufferPointer<UInt8>) -> Int64? {
        guard text.last == UInt8(ascii: "s") else { return nil }
        let number = text.dropLast()
        let dot = number.firstIndex(of: UInt8(ascii: ".")) ?? number.endIndex
        let whole = number[..<dot]
        guard !whole.isEmpty, whole.count <= 12, whole.allSatisfy(ASCII.isDigit) else { return nil }
        if dot < number.endIndex {
            let fraction = number[(dot + 1)...]
            guard !fraction.isEmpty, fraction.count <= 9, fraction.allSatisfy(ASCII.isDigit) else { return nil }
        }
        return whole.reduce(0) { $0 * 10 + Int64($1 - UInt8(ascii: "0")) }
    }

    /// RFC 3339: `YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM)`.
    static func isRFC3339(_ b: UnsafeBufferPointer<UInt8>) -> Bool {
        func digits(_ range: Range<Int>) -> Int? {
            guard range.upperBound <= b.count else { return nil }
            var value = 0
            for index in range {
                guard ASCII.isDigit(b[index]) else { return nil }
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
            while index < b.count, ASCII.isDigit(b[index]) { index += 1 }
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
    static func isHexColor(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        bytes.count == 7 && bytes[0] == UInt8(ascii: "#") && bytes.dropFirst().allSatisfy(ASCII.isHexDigit)
    }
}
