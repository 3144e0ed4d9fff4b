/// A parsed JSON document that owns its storage: the input bytes and the document's entries. A
/// `Message` keeps one, so its payloads are rendered from the bytes as received, without trees.
struct StoredJSON: Sendable {
    let bytes: [UInt8]
    let entries: [JSONDocument.Entry]

    /// Keeps `document`, which must have been parsed from `bytes`.
    init(bytes: [UInt8], document: JSONDocument) {
        self.bytes = bytes
        self.entries = Array(document.entries)
    }

    /// Calls `body` with the document; it is valid only during the call.
    func withDocument<R>(_ body: (JSONDocument) -> R) -> R {
        self.bytes.withUnsafeBufferPointer { bytes in
            self.entries.withUnsafeBufferPointer { entries in body(JSONDocument(bytes: bytes, entries: entries)) }
        }
    }
}
