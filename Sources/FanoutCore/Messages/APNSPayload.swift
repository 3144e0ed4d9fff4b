/// How FCM turns a message into the APNs request body (written straight to bytes, values copied
/// from the send body): `apns.payload` as given with `aps` first, `aps.alert` from `notification`
/// when the payload has none, the image as `fcm_options.image` with `mutable-content`, `data` as
/// top-level custom keys, and `content-available: 1` for a message with nothing to show (a
/// background push).
enum APNSPayload {
    static func render(_ document: JSONDocument, _ parts: Message.Parts, to writer: inout JSONWriter) {
        let payload = parts.apnsPayload
        let aps = GivenAPS(document, parts)
        writer.openObject()
        writer.key(static: "aps")
        writer.openObject()
        if let given = aps.index {
            for member in document.members(of: given) {
                writer.member(document, member)
            }
        }
        if !aps.hasAlert, parts.title != nil || parts.body != nil {
            writer.key(static: "alert")
            writer.openObject()
            if let title = parts.title {
                writer.key(static: "title")
                writer.write(document, title)
            }
            if let body = parts.body {
                writer.key(static: "body")
                writer.write(document, body)
            }
            writer.closeObject()
        }
        let image = parts.apnsImage ?? parts.image
        if image != nil, !aps.hasMutableContent {
            writer.key(static: "mutable-content")
            writer.write(static: "1")
        }
        if !self.isVisible(parts, aps), !aps.hasContentAvailable {
            writer.key(static: "content-available")
            writer.write(static: "1")
        }
        writer.closeObject()
        if let payload {
            for member in document.members(of: payload) where !document.string(at: member.key, equals: "aps") {
                writer.member(document, member)
            }
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
            let given = MemberLookup(document, payload, lookups: document.count(of: data))
            for member in document.members(of: data) {
                if document.string(at: member.key, equals: "aps") || (addsOptions && document.string(at: member.key, equals: "fcm_options")) {
                    continue
                }
                if given.member(withKeyEqualTo: member.key) != nil { continue }
                writer.member(document, member)
            }
        }
        writer.closeObject()
    }

    /// Whether the APNs body shows something: the payload's own alert, badge or sound, or
    /// `notification`'s title or body as the alert.
    static func isVisible(_ document: JSONDocument, _ parts: Message.Parts) -> Bool {
        self.isVisible(parts, GivenAPS(document, parts))
    }

    private static func isVisible(_ parts: Message.Parts, _ aps: GivenAPS) -> Bool {
        parts.title != nil || parts.body != nil || aps.hasAlert || aps.hasBadge || aps.hasSound
    }

    /// The keys of `apns.payload.aps` that rendering decides on, found in one pass.
    private struct GivenAPS {
        /// The `aps` object's entry (the validator admits only an object as `aps`).
        var index: Int?
        var hasAlert = false
        var hasBadge = false
        var hasSound = false
        var hasMutableContent = false
        var hasContentAvailable = false

        init(_ document: JSONDocument, _ parts: Message.Parts) {
            guard let payload = parts.apnsPayload, let aps = document.member(of: payload, named: "aps"), document.kind(of: aps) == .object else {
                return
            }
            self.index = aps
            for member in document.members(of: aps) {
                let key = member.key
                if document.string(at: key, equals: "alert") {
                    self.hasAlert = true
                } else if document.string(at: key, equals: "badge") {
                    self.hasBadge = true
                } else if document.string(at: key, equals: "sound") {
                    self.hasSound = true
                } else if document.string(at: key, equals: "mutable-content") {
                    self.hasMutableContent = true
                } else if document.string(at: key, equals: "content-available") {
                    self.hasContentAvailable = true
                }
            }
        }
    }
}
