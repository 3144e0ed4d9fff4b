extension MessageParser {
    static let apnsPushTypes: Set<String> = [
        "alert", "background", "location", "voip", "complication", "fileprovider", "mdm", "liveactivity", "pushtotalk",
        "widgets", "controls",
    ]
    private static let interruptionLevels: Set<String> = ["passive", "active", "time-sensitive", "critical"]
    private static let alertKeys: Set<String> = [
        "title", "subtitle", "body", "launch-image", "title-loc-key", "title-loc-args", "subtitle-loc-key",
        "subtitle-loc-args", "loc-key", "loc-args", "action-loc-key", "action", "summary-arg", "summary-arg-count",
    ]

    static func apns(_ reader: inout ObjectReader, violations: inout Violations) -> Message.APNSConfig {
        var config = Message.APNSConfig(headers: [])
        if let headers = reader.stringMap("headers", violations: &violations) {
            self.checkAPNsHeaders(headers, at: reader.field("headers"), violations: &violations)
            config.headers = headers
        }
        if let payload = reader.jsonObject("payload", violations: &violations) {
            self.checkAPNsPayload(payload, at: reader.field("payload"), violations: &violations)
            config.payload = payload
        }
        if var options = reader.object("fcm_options", violations: &violations) {
            config.analyticsLabel = self.analyticsLabel(&options, violations: &violations)
            config.image = options.string("image", violations: &violations)
            options.finish(violations: &violations)
        }
        if let token = reader.string("live_activity_token", violations: &violations) {
            if token.isEmpty {
                violations.add(reader.field("live_activity_token"), "must be a non-empty string")
            }
            config.liveActivityToken = token
        }
        reader.finish(violations: &violations)
        return config
    }

    private static func checkAPNsHeaders(_ headers: [(key: String, value: String)], at path: @autoclosure () -> String, violations: inout Violations) {
        for (name, value) in headers {
            var field: String { "\(path()).\(ObjectReader.printable(name))" }
            switch ASCII.lowercased(name) {
            case "apns-priority":
                if !["10", "5", "1"].contains(value) { violations.add(field, "must be \"10\", \"5\" or \"1\"") }
            case "apns-push-type":
                if !self.apnsPushTypes.contains(value) {
                    violations.add(field, "must be one of \(self.apnsPushTypes.sorted().joined(separator: ", "))")
                }
            case "apns-expiration":
                if UInt64(value) == nil { violations.add(field, "must be a UNIX time in seconds (0 for immediate expiry)") }
            case "apns-collapse-id":
                if value.utf8.count > 64 { violations.add(field, "must not exceed 64 bytes") }
            case "apns-id":
                if !self.isUUID(value) { violations.add(field, "must be a canonical UUID (8-4-4-4-12 hexadecimal digits)") }
            case "apns-topic":
                if value.isEmpty { violations.add(field, "must not be empty") }
            default:
                break
            }
        }
    }

    /// `apns.payload`: `aps` must be an object following Apple's payload key reference.
    private static func checkAPNsPayload(_ payload: JSONObject, at path: @autoclosure () -> String, violations: inout Violations) {
        guard let aps = payload["aps"] else { return }
        var apsPath: String { "\(path()).aps" }
        guard case .object(let object) = aps else {
            violations.add(apsPath, "expected an object, got \(aps.typeName)")
            return
        }
        for member in object.members {
            var field: String { "\(apsPath).\(ObjectReader.printable(member.key))" }
            let value = member.value
            switch member.key {
            case "alert":
                self.checkAlert(value, at: field, violations: &violations)
            case "badge":
                if case .number(let number) = value, let badge = number.int64, badge >= 0 {} else {
                    violations.add(field, "must be a non-negative integer")
                }
            case "sound":
                self.checkSound(value, at: field, violations: &violations)
            case "content-available", "mutable-content":
                if case .number(let number) = value, number.int64 == 1 || number.int64 == 0 {} else {
                    violations.add(field, "must be 1 (or 0)")
                }
            case "category", "thread-id", "target-content-id", "filter-criteria", "event", "attributes-type":
                if case .string = value {} else { violations.add(field, "expected a string, got \(value.typeName)") }
            case "interruption-level":
                if case .string(let level) = value, self.interruptionLevels.contains(level) {} else {
                    violations.add(field, "must be passive, active, time-sensitive or critical")
                }
            case "relevance-score":
                if case .number(let number) = value, let score = number.double, (0...1).contains(score) {} else {
                    violations.add(field, "must be a number in [0, 1]")
                }
            case "timestamp", "stale-date", "dismissal-date":
                if case .number(let number) = value, let time = number.int64, time >= 0 {} else {
                    violations.add(field, "must be a UNIX time in seconds")
                }
            case "content-state", "attributes":
                if case .object = value {} else { violations.add(field, "expected an object, got \(value.typeName)") }
            default:
                break  // custom keys inside aps are allowed (the SDKs' custom_data)
            }
        }
    }

    private static func checkAlert(_ alert: JSONValue, at path: @autoclosure () -> String, violations: inout Violations) {
        switch alert {
        case .string:
            return
        case .object(let object):
            for member in object.members {
                var field: String { "\(path()).\(ObjectReader.printable(member.key))" }
                guard self.alertKeys.contains(member.key) else {
                    violations.add(path(), "Unknown name \"\(ObjectReader.printable(member.key))\" in the alert dictionary")
                    continue
                }
                if member.key.hasSuffix("-args") {
                    guard case .array(let elements) = member.value, elements.allSatisfy({ if case .string = $0 { true } else { false } }) else {
                        violations.add(field, "expected an array of strings")
                        continue
                    }
                    let keyName = String(member.key.dropLast(4)) + "key"
                    if !elements.isEmpty, object[keyName] == nil {
                        violations.add(field, "\(keyName) is required when specifying \(member.key)")
                    }
                } else if member.key == "summary-arg-count" {
                    if case .number(let number) = member.value, number.int64 != nil {} else {
                        violations.add(field, "expected an integer")
                    }
                } else if case .string = member.value {
                } else {
                    violations.add(field, "expected a string, got \(member.value.typeName)")
                }
            }
        default:
            violations.add(path(), "must be a string or an alert dictionary, got \(alert.typeName)")
        }
    }

    private static func checkSound(_ sound: JSONValue, at path: @autoclosure () -> String, violations: inout Violations) {
        switch sound {
        case .string(let name):
            if name.isEmpty { violations.add(path(), "must be a non-empty string") }
        case .object(let object):
            for member in object.members {
                var field: String { "\(path()).\(ObjectReader.printable(member.key))" }
                switch member.key {
                case "critical":
                    if case .number(let number) = member.value, number.int64 == 0 || number.int64 == 1 {} else {
                        violations.add(field, "must be 1 (or 0)")
                    }
                case "name":
                    if case .string(let name) = member.value, !name.isEmpty {} else {
                        violations.add(field, "must be a non-empty string")
                    }
                case "volume":
                    if case .number(let number) = member.value, let volume = number.double, (0...1).contains(volume) {} else {
                        violations.add(field, "volume must be in the interval [0, 1]")
                    }
                default:
                    violations.add(path(), "Unknown name \"\(ObjectReader.printable(member.key))\" in a critical sound")
                }
            }
            if object["name"] == nil {
                violations.add("\(path()).name", "is required in a critical sound")
            }
        default:
            violations.add(path(), "must be a sound name or a critical sound dictionary, got \(sound.typeName)")
        }
    }

    /// `8-4-4-4-12` hexadecimal digits.
    static func isUUID(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == 36 else { return false }
        for (index, byte) in bytes.enumerated() {
            if [8, 13, 18, 23].contains(index) {
                if byte != UInt8(ascii: "-") { return false }
            } else if !ASCII.isHexDigit(byte) {
                return false
            }
        }
        return true
    }
}
