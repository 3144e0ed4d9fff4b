/// A Firebase app id (`1:1234567890:android:321abc456def7890`): treated as opaque, 1...256 bytes of
/// visible ASCII. A `String`, or bytes a block keeps (`init(keptIn:)`, `HeldText`).
public struct AppID: Hashable, Sendable, CustomStringConvertible {
    public static let maximumLength = 256

    @usableFromInline
    let text: HeldText

    public var value: String { self.text.string }

    public init?(_ value: String) {
        guard ASCII.isVisibleString(value, lengths: 1...Self.maximumLength) else { return nil }
        self.text = .string(value)
    }

    /// An app id from a string known to be one (a constant).
    package init(validated value: String) {
        self.text = .string(value)
    }

    /// An app id whose bytes `kept` holds, already validated as one (`isValid(utf8:)`): the bytes
    /// are not copied, and the block stays alive while the app id does.
    package init(keptIn kept: StoredToken) {
        self.text = .kept(kept)
    }

    /// Whether UTF-8 bytes are an app id: 1...256 bytes of visible ASCII.
    package static func isValid(utf8 bytes: UnsafeRawBufferPointer) -> Bool {
        ASCII.isVisibleBytes(bytes, lengths: 1...Self.maximumLength)
    }

    /// The same app id held as a `String` of its own: what a store that outlives the request
    /// keeps (an app id a block keeps would keep the whole block alive).
    package var owned: AppID {
        if case .string = self.text { return self }
        return AppID(validated: self.value)
    }

    /// Calls `body` with the app id's UTF-8 bytes, in place.
    @inlinable
    public func withUTF8<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try self.text.withUTF8(body)
    }

    public var description: String { self.value }
}
