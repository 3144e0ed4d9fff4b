extension MessageParser {
    private static let urgencies: Set<String> = ["very-low", "low", "normal", "high"]

    static func webpush(_ reader: inout ObjectReader, violations: inout Violations) -> Message.WebpushConfig {
        var config = Message.WebpushConfig(headers: [])
        if let headers = reader.stringMap("headers", violations: &violations) {
            let path = reader.field("headers")
            for (name, value) in headers {
                switch ASCII.lowercased(name) {
                case "ttl":
                    if UInt32(value) == nil {
                        violations.add("\(path).\(ObjectReader.printable(name))", "must be a non-negative number of seconds")
                    }
                case "urgency":
                    if !self.urgencies.contains(value) {
                        violations.add("\(path).\(ObjectReader.printable(name))", "must be very-low, low, normal or high")
                    }
                case "topic":
                    // RFC 8030: at most 32 characters of the URL-safe base64 alphabet.
                    if value.isEmpty || value.utf8.count > 32 || FID.isBase64URL(value) == false {
                        violations.add("\(path).\(ObjectReader.printable(name))", "must be 1...32 characters of [A-Za-z0-9_-]")
                    }
                default:
                    break
                }
            }
            config.headers = headers
        }
        if let data = reader.stringMap("data", violations: &violations) {
            self.checkDataKeys(data, at: reader.field("data"), violations: &violations)
            config.data = data
        }
        if let object = reader.jsonObject("notification", violations: &violations) {
            if let direction = object["dir"] ?? object["direction"] {
                if case .string(let value) = direction, ["auto", "ltr", "rtl"].contains(value) {
                } else {
                    violations.add("\(reader.field("notification")).dir", "must be auto, ltr or rtl")
                }
            }
            for key in ["title", "body", "icon", "badge", "image", "tag", "lang"] {
                if let value = object[key], case .string = value {} else if let value = object[key] {
                    violations.add("\(reader.field("notification")).\(key)", "expected a string, got \(value.typeName)")
                }
            }
            config.notification = object
        }
        if var options = reader.object("fcm_options", violations: &violations) {
            if let link = options.string("link", violations: &violations) {
                if link.hasPrefix("https://") && link.utf8.count > 8 {
                    config.link = link
                } else {
                    violations.add(options.field("link"), "must be an HTTPS URL")
                }
            }
            config.analyticsLabel = self.analyticsLabel(&options, violations: &violations)
            options.finish(violations: &violations)
        }
        reader.finish(violations: &violations)
        return config
    }
}

extension FID {
    /// Whether every character is in the URL-safe base64 alphabet.
    static func isBase64URL(_ text: String) -> Bool {
        text.utf8.allSatisfy { ASCII.isAlphanumeric($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") }
    }
}
