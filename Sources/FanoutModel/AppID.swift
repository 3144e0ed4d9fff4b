/// A Firebase app id (`1:1234567890:android:321abc456def7890`): treated as opaque, 1...256 bytes of
/// visible ASCII.
public struct AppID: Hashable, Sendable, CustomStringConvertible {
    public static let maximumLength = 256

    public let value: String

    public init?(_ value: String) {
        guard ASCII.isVisibleString(value, lengths: 1...Self.maximumLength) else { return nil }
        self.value = value
    }

    /// An app id from a string known to be one (a constant).
    package init(validated value: String) {
        self.value = value
    }

    public var description: String { self.value }
}
