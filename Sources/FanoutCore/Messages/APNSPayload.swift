/// How FCM turns a message into the APNs request body: `apns.payload` as given, `aps.alert` from
/// `notification` when the payload has none, the image as `fcm_options.image` with
/// `mutable-content`, `data` as top-level custom keys, and `content-available: 1` for a message
/// with nothing to show (a background push).
enum APNSPayload {
    static func render(_ message: Message) -> JSONObject {
        var body = message.apns?.payload ?? JSONObject()
        var aps: JSONObject
        if case .object(let given)? = body["aps"] {
            aps = given
        } else {
            aps = JSONObject()
        }
        if aps["alert"] == nil, let notification = message.notification, notification.title != nil || notification.body != nil {
            var alert = JSONObject()
            if let title = notification.title { alert.members.append(.init(key: "title", value: .string(title))) }
            if let body = notification.body { alert.members.append(.init(key: "body", value: .string(body))) }
            aps.members.append(.init(key: "alert", value: .object(alert)))
        }
        let image = message.apns?.image ?? message.notification?.image
        if let image {
            if aps["mutable-content"] == nil {
                aps.members.append(.init(key: "mutable-content", value: .number(JSONNumber(text: "1"))))
            }
            if body["fcm_options"] == nil {
                body.members.append(
                    .init(key: "fcm_options", value: .object(JSONObject([.init(key: "image", value: .string(image))])))
                )
            }
        }
        if !self.isVisible(aps), aps["content-available"] == nil {
            aps.members.append(.init(key: "content-available", value: .number(JSONNumber(text: "1"))))
        }
        body.members.removeAll { $0.key == "aps" }
        body.members.insert(.init(key: "aps", value: .object(aps)), at: 0)
        for (key, value) in message.data where body[key] == nil {
            body.members.append(.init(key: key, value: .string(value)))
        }
        return body
    }

    /// Whether the notification shows something (alert, badge or sound).
    static func isVisible(_ aps: JSONObject) -> Bool {
        aps["alert"] != nil || aps["badge"] != nil || aps["sound"] != nil
    }

    /// Apple: priority 10 "is an error" for a push that contains only `content-available`; FCM
    /// requires 5 for data-only messages to iOS.
    static func dataOnlyPriorityViolation(message: Message, apns: Message.APNSConfig) -> String? {
        guard apns.header("apns-priority") == "10" else { return nil }
        // What `render` would show: the payload's own alert, badge or sound, or `notification`'s alert.
        if case .object(let aps)? = apns.payload?["aps"], self.isVisible(aps) { return nil }
        if let notification = message.notification, notification.title != nil || notification.body != nil { return nil }
        return "a data-only (background) message to iOS must use apns-priority 5, not 10"
    }
}
