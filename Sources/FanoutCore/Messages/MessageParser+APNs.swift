extension MessageParser {
    enum APNSField: Int, ProtoField {
        case headers, payload, fcmOptions, liveActivityToken
        typealias Values = InlineArray<4, Int32>
        static let table = FieldTable(Self.self)
    }

    enum APNSFCMOptionsField: Int, ProtoField {
        case analyticsLabel, image
        typealias Values = InlineArray<2, Int32>
        static let table = FieldTable(Self.self)
    }

    static let apnsPushTypes: [StaticString] = [
        "alert", "background", "location", "voip", "complication", "fileprovider", "mdm", "liveactivity", "pushtotalk",
        "widgets", "controls",
    ]
    private static let interruptionLevels: [StaticString] = ["passive", "active", "time-sensitive", "critical"]

    /// The APNs headers with rules, by name in any case.
    private enum APNsHeader: Int {
        case priority, pushType, expiration, collapseID, id, topic
        static let names = HeaderNames<Self>(["apns-priority", "apns-push-type", "apns-expiration", "apns-collapse-id", "apns-id", "apns-topic"])
    }

    /// The keys of Apple's `aps` dictionary that have rules (others are custom data, allowed).
    private enum APSKey: Int, CaseIterable {
        case alert, badge, sound, contentAvailable, mutableContent, category, threadID, targetContentID, filterCriteria
        case event, attributesType, interruptionLevel, relevanceScore, timestamp, staleDate, dismissalDate
        case contentState, attributes

        static let table = FieldTable(exactNames: [
            "alert", "badge", "sound", "content-available", "mutable-content", "category", "thread-id", "target-content-id",
            "filter-criteria", "event", "attributes-type", "interruption-level", "relevance-score", "timestamp", "stale-date",
            "dismissal-date", "content-state", "attributes",
        ])
    }

    /// The keys of an alert dictionary; each `-args` key needs its `-key` (`loc-args` and `loc-key`).
    private enum AlertKey: Int, CaseIterable {
        case title, subtitle, body, launchImage, titleLocKey, titleLocArgs, subtitleLocKey, subtitleLocArgs, locKey, locArgs
        case actionLocKey, action, summaryArg, summaryArgCount

        static let table = FieldTable(exactNames: [
            "title", "subtitle", "body", "launch-image", "title-loc-key", "title-loc-args", "subtitle-loc-key",
            "subtitle-loc-args", "loc-key", "loc-args", "action-loc-key", "action", "summary-arg", "summary-arg-count",
        ])

        /// For an `-args` key, the key it needs.
        var requiredKey: AlertKey? {
            switch self {
            case .titleLocArgs: return .titleLocKey
            case .subtitleLocArgs: return .subtitleLocKey
            case .locArgs: return .locKey
            default: return nil
            }
        }
    }

    /// `apns`: the headers routing reads go to `options`, the payload and image to `parts`.
    static func apns(
        _ reader: ObjectReader<APNSField>,
        parts: inout Message.Parts,
        options: inout Message.DeliveryOptions,
        violations: inout Violations
    ) {
        let document = reader.document
        if let headers = reader.stringMap(.headers, violations: &violations) {
            self.checkAPNsHeaders(document, headers, options: &options, violations: &violations)
            parts.apnsHeaders = headers
        }
        if let payload = reader.jsonObject(.payload, violations: &violations) {
            self.checkAPNsPayload(document, payload, parts: &parts, violations: &violations)
            parts.apnsPayload = payload
        }
        if let fcmOptions = reader.object(.fcmOptions, as: APNSFCMOptionsField.self, at: "message.apns.fcm_options", violations: &violations) {
            self.checkAnalyticsLabel(fcmOptions, .analyticsLabel, violations: &violations)
            parts.apnsImage = fcmOptions.string(.image, violations: &violations)
        }
        if let token = reader.string(.liveActivityToken, violations: &violations), document.stringLength(at: token) == 0 {
            violations.add(reader.path(of: .liveActivityToken), "must be a non-empty string")
        }
    }

    /// Checks the headers Apple defines (names in any case); the first of each sets `options`.
    private static func checkAPNsHeaders(
        _ document: JSONDocument,
        _ headers: Int,
        options: inout Message.DeliveryOptions,
        violations: inout Violations
    ) {
        for member in document.members(of: headers) {
            var field: String { "message.apns.headers.\(Violations.printable(document.string(at: member.key) ?? ""))" }
            let value = member.value
            switch document.withStringBytes(at: member.key, APNsHeader.names.header(named:)) {
            case .priority:
                let priority: Int? =
                    document.string(at: value, equals: "10") ? 10
                    : document.string(at: value, equals: "5") ? 5
                    : document.string(at: value, equals: "1") ? 1 : nil
                if let priority {
                    options.apnsPriority = options.apnsPriority ?? priority
                } else {
                    violations.add(field, "must be \"10\", \"5\" or \"1\"")
                }
            case .pushType:
                if document.string(at: value, isOneOf: self.apnsPushTypes) {
                    options.apnsPushType = options.apnsPushType ?? document.string(at: value)
                } else {
                    violations.add(field, "must be one of \(self.apnsPushTypes.map(\.description).sorted().joined(separator: ", "))")
                }
            case .expiration:
                if let expiration = document.withStringBytes(at: value, { ASCII.decimal($0) }) {
                    options.apnsExpiration = options.apnsExpiration ?? expiration
                } else {
                    violations.add(field, "must be a UNIX time in seconds (0 for immediate expiry)")
                }
            case .collapseID:
                if document.stringLength(at: value) <= 64 {
                    options.apnsCollapseID = options.apnsCollapseID ?? document.string(at: value)
                } else {
                    violations.add(field, "must not exceed 64 bytes")
                }
            case .id:
                if !document.withStringBytes(at: value, self.isUUID) {
                    violations.add(field, "must be a canonical UUID (8-4-4-4-12 hexadecimal digits)")
                }
            case .topic:
                if document.stringLength(at: value) == 0 {
                    violations.add(field, "must not be empty")
                } else {
                    options.apnsTopic = options.apnsTopic ?? document.string(at: value)
                }
            case nil:
                break
            }
        }
    }

    /// `apns.payload`: `aps` must be an object following Apple's payload key reference. Where it
    /// is and which keys rendering decides on go to `parts`.
    private static func checkAPNsPayload(_ document: JSONDocument, _ payload: Int, parts: inout Message.Parts, violations: inout Violations) {
        guard let aps = document.member(of: payload, named: "aps") else { return }
        let apsPath = "message.apns.payload.aps"
        guard document.kind(of: aps) == .object else {
            violations.add(apsPath, "expected an object, got \(document.typeName(of: aps))")
            return
        }
        parts.apnsAPS = aps
        for member in document.members(of: aps) {
            guard let key = APSKey.table.field(ofKey: member.key, in: document).flatMap(APSKey.init(rawValue:)) else {
                continue  // custom keys inside aps are allowed (the SDKs' custom_data)
            }
            var field: String { "\(apsPath).\(APSKey.table.names[key.rawValue])" }
            let value = member.value
            switch key {
            case .alert:
                parts.apsKeys.insert(.alert)
                self.checkAlert(document, value, at: field, violations: &violations)
            case .badge:
                parts.apsKeys.insert(.badge)
                if (document.int64(at: value) ?? -1) < 0 { violations.add(field, "must be a non-negative integer") }
            case .sound:
                parts.apsKeys.insert(.sound)
                self.checkSound(document, value, at: field, violations: &violations)
            case .contentAvailable, .mutableContent:
                parts.apsKeys.insert(key == .contentAvailable ? .contentAvailable : .mutableContent)
                if ![0, 1].contains(document.int64(at: value)) { violations.add(field, "must be 1 (or 0)") }
            case .category, .threadID, .targetContentID, .filterCriteria, .event, .attributesType:
                if document.kind(of: value) != .string { violations.add(field, "expected a string, got \(document.typeName(of: value))") }
            case .interruptionLevel:
                if !document.string(at: value, isOneOf: self.interruptionLevels) {
                    violations.add(field, "must be passive, active, time-sensitive or critical")
                }
            case .relevanceScore:
                if let score = document.double(at: value), (0...1).contains(score) {} else {
                    violations.add(field, "must be a number in [0, 1]")
                }
            case .timestamp, .staleDate, .dismissalDate:
                if (document.int64(at: value) ?? -1) < 0 { violations.add(field, "must be a UNIX time in seconds") }
            case .contentState, .attributes:
                if document.kind(of: value) != .object { violations.add(field, "expected an object, got \(document.typeName(of: value))") }
            }
        }
    }

    private static func checkAlert(_ document: JSONDocument, _ alert: Int, at path: @autoclosure () -> String, violations: inout Violations) {
        switch document.kind(of: alert) {
        case .string:
            return
        case .object:
            for member in document.members(of: alert) {
                guard let key = AlertKey.table.field(ofKey: member.key, in: document).flatMap(AlertKey.init(rawValue:)) else {
                    violations.add(path(), "Unknown name \"\(Violations.printable(document.string(at: member.key) ?? ""))\" in the alert dictionary")
                    continue
                }
                var field: String { "\(path()).\(AlertKey.table.names[key.rawValue])" }
                let value = member.value
                if let requiredKey = key.requiredKey {
                    guard document.kind(of: value) == .array, document.elements(of: value).allSatisfy({ document.kind(of: $0) == .string }) else {
                        violations.add(field, "expected an array of strings")
                        continue
                    }
                    let keyName = AlertKey.table.names[requiredKey.rawValue]
                    if !document.isEmpty(value),
                        !document.members(of: alert).contains(where: { document.withStringBytes(at: $0.key) { $0.elementsEqual(keyName.utf8) } })
                    {
                        violations.add(field, "\(keyName) is required when specifying \(AlertKey.table.names[key.rawValue])")
                    }
                } else if key == .summaryArgCount {
                    if document.int64(at: value) == nil { violations.add(field, "expected an integer") }
                } else if document.kind(of: value) != .string {
                    violations.add(field, "expected a string, got \(document.typeName(of: value))")
                }
            }
        default:
            violations.add(path(), "must be a string or an alert dictionary, got \(document.typeName(of: alert))")
        }
    }

    private static func checkSound(_ document: JSONDocument, _ sound: Int, at path: @autoclosure () -> String, violations: inout Violations) {
        switch document.kind(of: sound) {
        case .string:
            if document.stringLength(at: sound) == 0 { violations.add(path(), "must be a non-empty string") }
        case .object:
            var hasName = false
            for member in document.members(of: sound) {
                let value = member.value
                if document.string(at: member.key, equals: "critical") {
                    if ![0, 1].contains(document.int64(at: value)) { violations.add("\(path()).critical", "must be 1 (or 0)") }
                } else if document.string(at: member.key, equals: "name") {
                    hasName = true
                    if document.kind(of: value) != .string || document.stringLength(at: value) == 0 {
                        violations.add("\(path()).name", "must be a non-empty string")
                    }
                } else if document.string(at: member.key, equals: "volume") {
                    if let volume = document.double(at: value), (0...1).contains(volume) {} else {
                        violations.add("\(path()).volume", "volume must be in the interval [0, 1]")
                    }
                } else {
                    violations.add(path(), "Unknown name \"\(Violations.printable(document.string(at: member.key) ?? ""))\" in a critical sound")
                }
            }
            if !hasName {
                violations.add("\(path()).name", "is required in a critical sound")
            }
        default:
            violations.add(path(), "must be a sound name or a critical sound dictionary, got \(document.typeName(of: sound))")
        }
    }

    /// `8-4-4-4-12` hexadecimal digits.
    static func isUUID(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard bytes.count == 36 else { return false }
        for (index, byte) in bytes.enumerated() {
            if index == 8 || index == 13 || index == 18 || index == 23 {
                if byte != UInt8(ascii: "-") { return false }
            } else if !ASCII.isHexDigit(byte) {
                return false
            }
        }
        return true
    }
}
