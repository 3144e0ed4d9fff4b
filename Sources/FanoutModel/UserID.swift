/// An opaque user id (as Firebase Auth uids are): 1...128 bytes of visible ASCII.
public struct UserID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public static let maximumLength = 128

    public let value: String

    /// Validates `value`; `nil` when it is empty, too long or not visible ASCII.
    public init?(_ value: String) {
        guard ASCII.isVisibleString(value, lengths: 1...Self.maximumLength) else { return nil }
        self.value = value
    }

    public var description: String { self.value }

    public static func < (lhs: UserID, rhs: UserID) -> Bool { lhs.value < rhs.value }
}
