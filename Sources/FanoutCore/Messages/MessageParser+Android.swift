extension MessageParser {
    /// The longest TTL FCM accepts: 28 days.
    public static let maximumTTLSeconds: Int64 = 2_419_200

    static func android(_ reader: inout ObjectReader, violations: inout Violations) -> Message.AndroidConfig {
        var config = Message.AndroidConfig()
        config.collapseKey = reader.string("collapse_key", violations: &violations)
        if let priority = reader.string("priority", violations: &violations) {
            // Clients send "high"/"normal"; the proto enum names are "HIGH"/"NORMAL".
            switch priority {
            case "high", "HIGH": config.priority = .high
            case "normal", "NORMAL": config.priority = .normal
            default: violations.add(reader.field("priority"), "must be \"high\" or \"normal\"")
            }
        }
        if let ttl = reader.string("ttl", violations: &violations) {
            if let seconds = self.durationSeconds(ttl), seconds <= self.maximumTTLSeconds {
                config.ttlSeconds = seconds
            } else {
                violations.add(
                    reader.field("ttl"),
                    "Invalid TTL: expected a duration such as \"3600s\" between 0 and \(self.maximumTTLSeconds) seconds"
                )
            }
        }
        config.restrictedPackageName = reader.string("restricted_package_name", violations: &violations)
        if let data = reader.stringMap("data", violations: &violations) {
            self.checkDataKeys(data, at: reader.field("data"), violations: &violations)
            config.data = data
        }
        if var notification = reader.object("notification", violations: &violations) {
            config.notification = self.androidNotification(&notification, violations: &violations)
        }
        if var options = reader.object("fcm_options", violations: &violations) {
            config.analyticsLabel = self.analyticsLabel(&options, violations: &violations)
            options.finish(violations: &violations)
        }
        config.directBootOK = reader.bool("direct_boot_ok", violations: &violations)
        config.bandwidthConstrainedOK = reader.bool("bandwidth_constrained_ok", violations: &violations)
        config.restrictedSatelliteOK = reader.bool("restricted_satellite_ok", violations: &violations)
        reader.finish(violations: &violations)
        return config
    }

    private static let notificationPriorities: Set<String> = [
        "PRIORITY_UNSPECIFIED", "PRIORITY_MIN", "PRIORITY_LOW", "PRIORITY_DEFAULT", "PRIORITY_HIGH", "PRIORITY_MAX",
    ]
    private static let visibilities: Set<String> = ["VISIBILITY_UNSPECIFIED", "PRIVATE", "PUBLIC", "SECRET"]
    private static let proxies: Set<String> = ["PROXY_UNSPECIFIED", "ALLOW", "DENY", "IF_PRIORITY_LOWERED"]
    private static let notificationStrings = ["title", "body", "icon", "sound", "tag", "click_action", "channel_id", "ticker", "image"]
    private static let notificationLocalizations = [("body_loc_key", "body_loc_args"), ("title_loc_key", "title_loc_args")]
    private static let notificationBools = [
        "sticky", "local_only", "default_sound", "default_vibrate_timings", "default_light_settings", "bypass_proxy_notification",
    ]
    private static let notificationEnums = [
        ("notification_priority", notificationPriorities), ("visibility", visibilities), ("proxy", proxies),
    ]

    /// `android.notification` (AndroidNotification); returns the object for rendering.
    private static func androidNotification(_ reader: inout ObjectReader, violations: inout Violations) -> JSONObject {
        var rendered = JSONObject()
        func keep(_ name: String, _ value: JSONValue?) {
            if let value { rendered.members.append(.init(key: name, value: value)) }
        }
        for name in self.notificationStrings {
            keep(name, reader.string(name, violations: &violations).map(JSONValue.string))
        }
        if let color = reader.string("color", violations: &violations) {
            if self.isHexColor(color) {
                keep("color", .string(color))
            } else {
                violations.add(reader.field("color"), "must be in the form #RRGGBB")
            }
        }
        for (keyName, argsName) in self.notificationLocalizations {
            let key = reader.string(keyName, violations: &violations)
            let args = reader.strings(argsName, violations: &violations)
            keep(keyName, key.map(JSONValue.string))
            if let args {
                if key == nil, !args.isEmpty {
                    violations.add(reader.field(argsName), "\(keyName) is required when specifying \(argsName)")
                }
                keep(argsName, .array(args.map(JSONValue.string)))
            }
        }
        for name in self.notificationBools {
            keep(name, reader.bool(name, violations: &violations).map(JSONValue.bool))
        }
        if let eventTime = reader.string("event_time", violations: &violations) {
            if self.isRFC3339(eventTime) {
                keep("event_time", .string(eventTime))
            } else {
                violations.add(reader.field("event_time"), "must be an RFC 3339 timestamp such as 2026-01-01T12:00:00.000000Z")
            }
        }
        for (name, allowed) in self.notificationEnums {
            if let value = reader.string(name, violations: &violations) {
                if allowed.contains(value) {
                    keep(name, .string(value))
                } else {
                    violations.add(reader.field(name), "must be one of \(allowed.sorted().joined(separator: ", "))")
                }
            }
        }
        if let timings = reader.strings("vibrate_timings", violations: &violations) {
            for (index, timing) in timings.enumerated() where self.durationSeconds(timing) == nil {
                violations.add("\(reader.field("vibrate_timings"))[\(index)]", "must be a non-negative duration such as \"0.5s\"")
            }
            keep("vibrate_timings", .array(timings.map(JSONValue.string)))
        }
        if let count = reader.int32("notification_count", violations: &violations) {
            if count < 0 {
                violations.add(reader.field("notification_count"), "must not be negative")
            }
            keep("notification_count", .number(JSONNumber(text: String(count))))
        }
        if var light = reader.object("light_settings", violations: &violations) {
            keep("light_settings", self.lightSettings(&light, violations: &violations))
        }
        reader.finish(violations: &violations)
        return rendered
    }

    /// `light_settings`: `color` ({red, green, blue, alpha} in [0, 1]), `light_on_duration` and
    /// `light_off_duration`, all required.
    private static func lightSettings(_ reader: inout ObjectReader, violations: inout Violations) -> JSONValue {
        var rendered = JSONObject()
        if var color = reader.object("color", violations: &violations) {
            var colorObject = JSONObject()
            for channel in ["red", "green", "blue", "alpha"] {
                if let value = color.double(channel, violations: &violations) {
                    if (0...1).contains(value) {
                        colorObject.members.append(.init(key: channel, value: .number(JSONNumber(text: String(value)))))
                    } else {
                        violations.add(color.field(channel), "must be in the interval [0, 1]")
                    }
                }
            }
            color.finish(violations: &violations)
            rendered.members.append(.init(key: "color", value: .object(colorObject)))
        } else {
            violations.add(reader.field("color"), "is required in light_settings")
        }
        for name in ["light_on_duration", "light_off_duration"] {
            if let duration = reader.string(name, violations: &violations) {
                if self.durationSeconds(duration) != nil {
                    rendered.members.append(.init(key: name, value: .string(duration)))
                } else {
                    violations.add(reader.field(name), "must be a non-negative duration such as \"0.5s\"")
                }
            } else {
                violations.add(reader.field(name), "is required in light_settings")
            }
        }
        reader.finish(violations: &violations)
        return .object(rendered)
    }
}
