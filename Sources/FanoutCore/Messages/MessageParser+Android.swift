extension MessageParser {
    /// The longest TTL FCM accepts: 28 days.
    public static let maximumTTLSeconds: Int64 = 2_419_200

    enum AndroidField: Int, ProtoField {
        case collapseKey, priority, ttl, restrictedPackageName, data, notification, fcmOptions
        case directBootOk, bandwidthConstrainedOk, restrictedSatelliteOk
        typealias Values = InlineArray<10, Int32>
        static let table = FieldTable(Self.self)
    }

    enum AndroidNotificationField: Int, ProtoField {
        case title, body, icon, color, sound, tag, clickAction, bodyLocKey, bodyLocArgs, titleLocKey, titleLocArgs
        case channelId, ticker, sticky, eventTime, localOnly, notificationPriority, defaultSound, defaultVibrateTimings
        case defaultLightSettings, vibrateTimings, visibility, notificationCount, lightSettings, image
        case bypassProxyNotification, proxy
        typealias Values = InlineArray<27, Int32>
        static let table = FieldTable(Self.self)
    }

    enum LightSettingsField: Int, ProtoField {
        case color, lightOnDuration, lightOffDuration
        typealias Values = InlineArray<3, Int32>
        static let table = FieldTable(Self.self)
    }

    enum ColorField: Int, ProtoField {
        case red, green, blue, alpha
        typealias Values = InlineArray<4, Int32>
        static let table = FieldTable(Self.self)
    }

    /// `android`: its delivery options go to `options`, its overrides to `parts`.
    static func android(
        _ reader: ObjectReader<AndroidField>,
        parts: inout Message.Parts,
        options: inout Message.DeliveryOptions,
        violations: inout Violations
    ) {
        let document = reader.document
        options.androidCollapseKey = reader.decodedString(.collapseKey, violations: &violations)
        if let priority = reader.string(.priority, violations: &violations) {
            // Clients send "high"/"normal"; the proto enum names are "HIGH"/"NORMAL".
            if document.string(at: priority, isOneOf: ["high", "HIGH"]) {
                options.androidPriority = .high
            } else if document.string(at: priority, isOneOf: ["normal", "NORMAL"]) {
                options.androidPriority = .normal
            } else {
                violations.add(reader.path(of: .priority), "must be \"high\" or \"normal\"")
            }
        }
        if let ttl = reader.string(.ttl, violations: &violations) {
            if let seconds = document.withStringBytes(at: ttl, self.durationSeconds), seconds <= self.maximumTTLSeconds {
                options.androidTTLSeconds = seconds
            } else {
                violations.add(
                    reader.path(of: .ttl),
                    "Invalid TTL: expected a duration such as \"3600s\" between 0 and \(self.maximumTTLSeconds) seconds"
                )
            }
        }
        _ = reader.string(.restrictedPackageName, violations: &violations)
        if let data = reader.stringMap(.data, violations: &violations) {
            self.checkDataKeys(document, data, at: reader.path(of: .data), violations: &violations)
            parts.androidData = data
        }
        if let notification = reader.object(.notification, as: AndroidNotificationField.self, at: "message.android.notification", violations: &violations) {
            self.checkAndroidNotification(notification, violations: &violations)
            parts.androidNotification = notification.object
        }
        if let fcmOptions = reader.object(.fcmOptions, as: FCMOptionsField.self, at: "message.android.fcm_options", violations: &violations) {
            self.checkAnalyticsLabel(fcmOptions, .analyticsLabel, violations: &violations)
        }
        for field in [AndroidField.directBootOk, .bandwidthConstrainedOk, .restrictedSatelliteOk] {
            _ = reader.bool(field, violations: &violations)
        }
    }

    private static let notificationStrings: [AndroidNotificationField] = [
        .title, .body, .icon, .sound, .tag, .clickAction, .channelId, .ticker, .image,
    ]
    private static let notificationLocalizations: [(key: AndroidNotificationField, args: AndroidNotificationField)] = [
        (.bodyLocKey, .bodyLocArgs), (.titleLocKey, .titleLocArgs),
    ]
    private static let notificationBools: [AndroidNotificationField] = [
        .sticky, .localOnly, .defaultSound, .defaultVibrateTimings, .defaultLightSettings, .bypassProxyNotification,
    ]
    private static let notificationEnums: [(field: AndroidNotificationField, values: [StaticString])] = [
        (.notificationPriority, ["PRIORITY_UNSPECIFIED", "PRIORITY_MIN", "PRIORITY_LOW", "PRIORITY_DEFAULT", "PRIORITY_HIGH", "PRIORITY_MAX"]),
        (.visibility, ["VISIBILITY_UNSPECIFIED", "PRIVATE", "PUBLIC", "SECRET"]),
        (.proxy, ["PROXY_UNSPECIFIED", "ALLOW", "DENY", "IF_PRIORITY_LOWERED"]),
    ]

    /// `android.notification` (AndroidNotification).
    private static func checkAndroidNotification(_ reader: ObjectReader<AndroidNotificationField>, violations: inout Violations) {
        let document = reader.document
        for field in self.notificationStrings {
            _ = reader.string(field, violations: &violations)
        }
        if let color = reader.string(.color, violations: &violations), !document.withStringBytes(at: color, self.isHexColor) {
            violations.add(reader.path(of: .color), "must be in the form #RRGGBB")
        }
        for (key, args) in self.notificationLocalizations {
            let hasKey = reader.string(key, violations: &violations) != nil
            if let array = reader.strings(args, violations: &violations), !hasKey, !document.isEmpty(array) {
                let names = AndroidNotificationField.table.names
                violations.add(reader.path(of: args), "\(names[key.rawValue]) is required when specifying \(names[args.rawValue])")
            }
        }
        for field in self.notificationBools {
            _ = reader.bool(field, violations: &violations)
        }
        if let eventTime = reader.string(.eventTime, violations: &violations), !document.withStringBytes(at: eventTime, self.isRFC3339) {
            violations.add(reader.path(of: .eventTime), "must be an RFC 3339 timestamp such as 2026-01-01T12:00:00.000000Z")
        }
        for (field, values) in self.notificationEnums {
            if let value = reader.string(field, violations: &violations), !document.string(at: value, isOneOf: values) {
                violations.add(reader.path(of: field), "must be one of \(values.map(\.description).sorted().joined(separator: ", "))")
            }
        }
        if let timings = reader.strings(.vibrateTimings, violations: &violations) {
            for (index, timing) in document.elements(of: timings).enumerated() where document.withStringBytes(at: timing, self.durationSeconds) == nil {
                violations.add("\(reader.path(of: .vibrateTimings))[\(index)]", "must be a non-negative duration such as \"0.5s\"")
            }
        }
        if let count = reader.int32(.notificationCount, violations: &violations), count < 0 {
            violations.add(reader.path(of: .notificationCount), "must not be negative")
        }
        if let light = reader.object(.lightSettings, as: LightSettingsField.self, at: "message.android.notification.light_settings", violations: &violations) {
            self.checkLightSettings(light, violations: &violations)
        }
    }

    /// `light_settings`: `color` ({red, green, blue, alpha} in [0, 1]), `light_on_duration` and
    /// `light_off_duration`, all required.
    private static func checkLightSettings(_ reader: ObjectReader<LightSettingsField>, violations: inout Violations) {
        if let color = reader.object(.color, as: ColorField.self, at: "message.android.notification.light_settings.color", violations: &violations) {
            for channel in ColorField.allCases {
                if let value = color.double(channel, violations: &violations), !(0...1).contains(value) {
                    violations.add(color.path(of: channel), "must be in the interval [0, 1]")
                }
            }
        } else if reader.value(.color) == nil {
            violations.add(reader.path(of: .color), "is required in light_settings")
        }
        for field in [LightSettingsField.lightOnDuration, .lightOffDuration] {
            if let duration = reader.string(field, violations: &violations) {
                if reader.document.withStringBytes(at: duration, self.durationSeconds) == nil {
                    violations.add(reader.path(of: field), "must be a non-negative duration such as \"0.5s\"")
                }
            } else if reader.value(field) == nil {
                violations.add(reader.path(of: field), "is required in light_settings")
            }
        }
    }
}
