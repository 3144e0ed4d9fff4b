/// The FID a registration offers, as its decoder holds it: parsed already when it is a FID (a
/// `FID` is sixteen bytes; its text was a `String` allocation per registration), else the text
/// sent (an 11-character legacy Instance ID, which a project may accept, or something the engine
/// replaces with a FID of its own). Equal, and hashed alike, when the text is the same.
package enum OfferedFID: Hashable, Sendable {
    case text(String)
    case fid(FID)

    /// The offer as it was sent (a FID's text is the text it was parsed from).
    package var text: String {
        switch self {
        case .text(let text): text
        case .fid(let fid): fid.string
        }
    }

    /// The FID offered: a parsed one, or the text as `FID(_:allowingLegacy:)` reads it.
    package func fid(allowingLegacy: Bool) -> FID? {
        switch self {
        case .fid(let fid): fid
        case .text(let text): FID(text, allowingLegacy: allowingLegacy)
        }
    }

    /// The offer in `bytes` (UTF-8): a FID when they are one, else their text; nil when they are
    /// not UTF-8.
    package init?(utf8 bytes: UnsafeRawBufferPointer) {
        if let fid = FID(utf8: bytes) {
            self = .fid(fid)
        } else if UTF8Validation.isValid(bytes.assumingMemoryBound(to: UInt8.self)) {
            self = .text(String(decoding: bytes, as: UTF8.self))
        } else {
            return nil
        }
    }

    package static func == (left: OfferedFID, right: OfferedFID) -> Bool {
        switch (left, right) {
        case (.fid(let left), .fid(let right)): left == right
        default: left.text == right.text
        }
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(self.text)
    }
}
