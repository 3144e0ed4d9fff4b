/// How FCM turns a message into the APNs request body (written straight to bytes, values copied
/// from the send body): `apns.payload` as given with `aps` first, `aps.alert` from `notification`
/// when the payload has none, the image as `fcm_options.image` with `mutable-content`, `data` as
/// top-level custom keys, and `content-available: 1` for a message with nothing to show (a
/// background push).
enum APNSPayload {
    static func render(_ document: JSONDocument, _ parts: Message.Parts, to writer: inout JSONWriter) {
        let payload = parts.apnsPayload
        let apsKeys = parts.apsKeys
        writer.openObject()
        writer.key(static: "aps")
        writer.openObject()
        if let aps = parts.apnsAPS {
            writer.members(document, of: aps)
        }
        if !apsKeys.contains(.alert), parts.title != nil || parts.body != nil {
            writer.key(static: "alert")
            writer.openObject()
            if let title = parts.title { writer.member(static: "title", document, title) }
            if let body = parts.body { writer.member(static: "body", document, body) }
            writer.closeObject()
        }
        let image = parts.apnsImage ?? parts.image
        if image != nil, !apsKeys.contains(.mutableContent) {
            writer.key(static: "mutable-content")
            writer.write(static: "1")
        }
        if !self.isVisible(parts), !apsKeys.contains(.contentAvailable) {
            writer.key(static: "content-available")
            writer.write(static: "1")
        }
        writer.closeObject()
        if let payload {
            writer.members(document, of: payload) { $0.value != parts.apnsAPS }
        }
        let addsOptions = image != nil && payload.flatMap { document.member(of: $0, named: "fcm_options") } == nil
        if let image, addsOptions {
            writer.key(static: "fcm_options")
            writer.openObject()
            writer.key(static: "image")
            writer.write(document, image)
            writer.closeObject()
        }
        if let data = parts.data {
            let given = MemberLookup(document, payload, forKeysOf: data)
            writer.members(document, of: data) { member in
                !document.string(at: member.key, equals: "aps") && !(addsOptions && document.string(at: member.key, equals: "fcm_options"))
                    && given.member(withKeyEqualTo: member.key) == nil
            }
        }
        writer.closeObject()
    }

    /// Whether the APNs body shows something: the payload's own alert, badge or sound, or
    /// `notification`'s title or body as the alert.
    static func isVisible(_ parts: Message.Parts) -> Bool {
        parts.title != nil || parts.body != nil || !parts.apsKeys.isDisjoint(with: [.alert, .badge, .sound])
    }
}
