/// A field as its decoder holds it: the value its text names, parsed already (or, for a register
/// batch's tokens and app ids, kept in its frame's block), or the text sent, which the server
/// checks with the engine's rules and refuses by name. A decoder that parses what it can saves
/// each field a `String` of its own. Equal, and hashed alike, when the text is the same.
package enum Decoded<Value: DecodedValue>: Hashable, Sendable {
    case text(String)
    case value(Value)

    /// The field as it was sent (a parsed value's text is the text it was parsed from).
    package var text: String {
        switch self {
        case .text(let text): text
        case .value(let value): value.decodedText
        }
    }

    /// The value: the one held, or the text as `make` parses it (nil when it does not).
    package func value(parsing make: (String) -> Value?) -> Value? {
        switch self {
        case .value(let value): value
        case .text(let text): make(text)
        }
    }

    package static func == (left: Decoded, right: Decoded) -> Bool {
        switch (left, right) {
        case (.value(let left), .value(let right)): left == right
        default: left.text == right.text
        }
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(self.text)
    }
}

/// A value a decoder can hold parsed (`Decoded`): equal values have the same text.
package protocol DecodedValue: Hashable, Sendable {
    /// The text the value was parsed from.
    var decodedText: String { get }
}

extension FID: DecodedValue {
    package var decodedText: String { self.string }
}

extension RegistrationToken: DecodedValue {
    package var decodedText: String { self.value }
}

extension AppID: DecodedValue {
    package var decodedText: String { self.value }
}

/// The FID a registration offers, as its decoder holds it: parsed when it is a FID, else the text
/// sent (an 11-character legacy Instance ID, which a project may accept, or something the engine
/// replaces with a FID of its own).
package typealias OfferedFID = Decoded<FID>

extension Decoded where Value == FID {
    /// The FID offered: a parsed one, or the text as `FID(_:allowingLegacy:)` reads it.
    package func fid(allowingLegacy: Bool) -> FID? {
        self.value { FID($0, allowingLegacy: allowingLegacy) }
    }

    /// The offer in `bytes` (UTF-8): a FID when they are one, else their text; nil when they are
    /// not UTF-8.
    package init?(utf8 bytes: UnsafeRawBufferPointer) {
        if let fid = FID(utf8: bytes) {
            self = .value(fid)
        } else if UTF8Validation.isValid(bytes.assumingMemoryBound(to: UInt8.self)) {
            self = .text(String(decoding: bytes, as: UTF8.self))
        } else {
            return nil
        }
    }
}
