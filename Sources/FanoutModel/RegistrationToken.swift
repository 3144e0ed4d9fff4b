/// An FCM registration token: opaque, 1...4096 bytes of visible ASCII (`0x21...0x7E`).
///
/// Never parsed for a FID. Its `description` is redacted, so it cannot leak into logs or errors by
/// string interpolation; read `value` to get the token itself.
///
/// A token is a `String`, or bytes a block keeps (`init(keptIn:)`, `HeldText`).
public struct RegistrationToken: Hashable, Sendable, CustomStringConvertible {
    /// The longest token accepted, in bytes.
    public static let maximumLength = 4096

    /// The token's text as it is held: a `String`, or bytes a block keeps.
    @usableFromInline
    package let text: HeldText

    /// The token itself (made from the kept bytes, for a token a block keeps). Never log it.
    public var value: String { self.text.string }

    /// Validates `value`; `nil` when it is empty, longer than 4096 bytes, or not visible ASCII.
    public init?(_ value: String) {
        guard ASCII.isVisibleString(value, lengths: 1...Self.maximumLength) else { return nil }
        self.text = .string(value)
    }

    /// A token whose bytes `kept` holds, already validated as one (`isValid(utf8:)`): the bytes
    /// are not copied, and the block stays alive while the token does.
    package init(keptIn kept: StoredToken) {
        self.text = .kept(kept)
    }

    /// Validates UTF-8 bytes (from a frame) as a token, without a `String` until they pass.
    public init?(utf8 bytes: UnsafeRawBufferPointer) {
        guard Self.isValid(utf8: bytes) else { return nil }
        self.init(validatedBytes: bytes)
    }

    /// Whether UTF-8 bytes are a token: 1...4096 bytes of visible ASCII. Bytes already known to
    /// be visible ASCII (`RegistrationList.isKnownVisibleASCII`) need only their length checked.
    package static func isValid(utf8 bytes: UnsafeRawBufferPointer, knownVisibleASCII: Bool = false) -> Bool {
        knownVisibleASCII ? (1...Self.maximumLength).contains(bytes.count) : ASCII.isVisibleBytes(bytes, lengths: 1...Self.maximumLength)
    }

    /// A token from bytes already validated as one (stored by the engine after validation).
    package init(validatedBytes bytes: UnsafeRawBufferPointer) {
        self.text = .string(String(decoding: bytes, as: UTF8.self))
    }

    /// Calls `body` with the token's bytes, without copying them (nor the string: `String.withUTF8`
    /// wants a `var`, and the copy retained and released it on every lookup). Inlinable: called
    /// from another module, generic code runs unspecialized.
    @inlinable
    public func withUTF8<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try self.text.withUTF8(body)
    }

    /// The token's length in bytes.
    public var utf8Count: Int { self.text.utf8Count }

    /// Redacted: the length only.
    public var description: String { "<token: \(self.utf8Count) bytes>" }
}
