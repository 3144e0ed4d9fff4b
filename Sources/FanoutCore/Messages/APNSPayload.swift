/// How FCM turns a message into the APNs request body (written straight to bytes):
/// `apns.payload` as given with `aps` first, `aps.alert` from
/// `notification` when the payload has none, the image as `fcm_options.image` with
/// `mutable-content`, `data` as top-level custom keys, and `content-available: 1` for a message
/// with nothing to show (a background push).
enum APNSPayload {
    static func render(_ message: Message) -> [UInt8] {
        let payload = message.apns?.payload ?? JSONObject()
        // The validator admits only an object as `aps`.
        let givenAPS: JSONObject
        if case .object(let object)? = payload["aps"] { givenAPS = object } else { givenAPS = JSONObject() }
        var writer = JSONWriter(capacity: 1024)
        writer.openObject()
        writer.key("aps")
        writer.openObject()
        for member in givenAPS.members {
            writer.key(member.key)
            writer.write(member.value)
        }
        var isVisible = self.isVisible(givenAPS)
        if givenAPS["alert"] == nil, let notification = message.notification, notification.title != nil || notification.body != nil {
            writer.key("alert")
            writer.openObject()
            if let title = notification.title {
                writer.key("title")
                writer.write(string: title)
            }
            if let body = notification.body {
                writer.key("body")
                writer.write(string: body)
            }
            writer.closeObject()
            isVisible = true
        }
        let image = message.apns?.image ?? message.notification?.image
        if image != nil, givenAPS["mutable-content"] == nil {
            writer.key("mutable-content")
            writer.write(.number(JSONNumber(1)))
        }
        if !isVisible, givenAPS["content-available"] == nil {
            writer.key("content-available")
            writer.write(.number(JSONNumber(1)))
        }
        writer.closeObject()
        for member in payload.members where member.key != "aps" {
            writer.key(member.key)
            writer.write(member.value)
        }
        let addsOptions = image != nil && payload["fcm_options"] == nil
        if let image, addsOptions {
            writer.key("fcm_options")
            writer.openObject()
            writer.key("image")
            writer.write(string: image)
            writer.closeObject()
        }
        for (key, value) in message.data where key != "aps" && payload[key] == nil && !(addsOptions && key == "fcm_options") {
            writer.key(key)
            writer.write(string: value)
        }
        writer.closeObject()
        return writer.bytes
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
