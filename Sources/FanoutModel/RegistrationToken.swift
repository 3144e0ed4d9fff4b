/// An FCM registration token: opaque, 1...4096 bytes of visible ASCII (`0x21...0x7E`).
///
/// Never parsed for a FID. Its `description` is redacted, so it cannot leak into logs or errors by
/// string interpolation; read `value` to get the token itself.
///
/// A token is a `String`, or bytes a block keeps (`init(keptIn:)`): a register batch's decoder
/// copies its items' tokens into one block per frame, where a `String` per token was an
/// allocation, and a retain and release of a different object at each step from the frame to the
/// log. Equal tokens are equal, and hash alike, whichever way each is held.
public struct RegistrationToken: Hashable, Sendable, CustomStringConvertible {
    /// The longest token accepted, in bytes.
    public static let maximumLength = 4096

    @usableFromInline
    enum Storage: Sendable {
        case string(String)
        case kept(StoredToken)
    }

    @usableFromInline
    let storage: Storage

    /// The token itself (made from the kept bytes, for a token a block keeps). Never log it.
    public var value: String {
        switch self.storage {
        case .string(let value): value
        case .kept(let kept): kept.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        }
    }

    /// Validates `value`; `nil` when it is empty, longer than 4096 bytes, or not visible ASCII.
    public init?(_ value: String) {
        guard ASCII.isVisibleString(value, lengths: 1...Self.maximumLength) else { return nil }
        self.storage = .string(value)
    }

    /// A token whose bytes `kept` holds, already validated as one (`isValid(utf8:)`): the bytes
    /// are not copied, and the block stays alive while the token does.
    package init(keptIn kept: StoredToken) {
        self.storage = .kept(kept)
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
        self.storage = .string(String(decoding: bytes, as: UTF8.self))
    }

    /// Calls `body` with the token's bytes, without copying them (nor the string: `String.withUTF8`
    /// wants a `var`, and the copy retained and released it on every lookup). Inlinable: called
    /// from another module, generic code runs unspecialized.
    @inlinable
    public func withUTF8<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        switch self.storage {
        case .string(let value):
            if let result = try value.utf8.withContiguousStorageIfAvailable({ try body(UnsafeRawBufferPointer($0)) }) {
                return result
            }
            var value = value
            return try value.withUTF8 { try body(UnsafeRawBufferPointer($0)) }
        case .kept(let kept):
            return try kept.withUnsafeBytes(body)
        }
    }

    /// The token's length in bytes.
    public var utf8Count: Int {
        switch self.storage {
        case .string(let value): value.utf8.count
        case .kept(let kept): kept.count
        }
    }

    public static func == (left: RegistrationToken, right: RegistrationToken) -> Bool {
        if case .string(let left) = left.storage, case .string(let right) = right.storage { return left == right }
        return left.withUTF8 { left in right.withUTF8 { right in left.elementsEqual(right) } }
    }

    public func hash(into hasher: inout Hasher) {
        self.withUTF8 { hasher.combine(bytes: $0) }
    }

    /// Redacted: the length only.
    public var description: String { "<token: \(self.utf8Count) bytes>" }
}
