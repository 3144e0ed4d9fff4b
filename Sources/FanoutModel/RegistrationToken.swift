/// An FCM registration token: opaque, 1...4096 bytes of visible ASCII (`0x21...0x7E`).
///
/// Never parsed for a FID. Its `description` is redacted, so it cannot leak into logs or errors by
/// string interpolation; read `value` to get the token itself.
public struct RegistrationToken: Hashable, Sendable, CustomStringConvertible {
    /// The longest token accepted, in bytes.
    public static let maximumLength = 4096

    /// The token itself. Never log it.
    public let value: String

    /// Validates `value`; `nil` when it is empty, longer than 4096 bytes, or not visible ASCII.
    public init?(_ value: String) {
        guard ASCII.isVisibleString(value, lengths: 1...Self.maximumLength) else { return nil }
        self.value = value
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
        self.value = String(decoding: bytes, as: UTF8.self)
    }

    /// Calls `body` with the token's bytes, without copying them (nor the string: `String.withUTF8`
    /// wants a `var`, and the copy retained and released it on every lookup). Inlinable: called
    /// from another module, generic code runs unspecialized.
    @inlinable
    public func withUTF8<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        if let result = try self.value.utf8.withContiguousStorageIfAvailable({ try body(UnsafeRawBufferPointer($0)) }) {
            return result
        }
        var value = self.value
        return try value.withUTF8 { try body(UnsafeRawBufferPointer($0)) }
    }

    /// Redacted: the length only.
    public var description: String { "<token: \(self.value.utf8.count) bytes>" }
}
