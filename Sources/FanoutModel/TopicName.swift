/// A topic name: `^[a-zA-Z0-9-_.~%]{1,900}$` over the whole string, case-sensitive.
///
/// One leading `/topics/` is stripped, as the Admin SDKs do; `private/` topics are rejected
/// because `/` is not in the alphabet (fcm-rules.md sections 1.1 and 9).
public struct TopicName: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The longest topic name, in characters (all ASCII, so also bytes).
    public static let maximumLength = 900

    /// The name without any `/topics/` prefix.
    public let value: String

    /// Validates `string`, stripping one leading `/topics/`; `nil` when the rest is not a topic name.
    public init?(_ string: String) {
        var name = Substring(string)
        if name.hasPrefix("/topics/") {
            name = name.dropFirst(8)
        }
        guard Self.isValid(name.utf8) else { return nil }
        self.value = String(name)
    }

    /// Whether `bytes` are a topic name (FCM's `[a-zA-Z0-9-_.~%]{1,900}`). Inlinable, so that it
    /// is specialised for the caller's collection (the message validator's buffers).
    @inlinable
    package static func isValid(_ bytes: some Collection<UInt8>) -> Bool {
        var count = 0
        for byte in bytes {
            guard Self.isTopicCharacter(byte) else { return false }
            count += 1
            if count > Self.maximumLength { return false }
        }
        return count > 0
    }

    @inline(__always)
    @inlinable
    package static func isTopicCharacter(_ byte: UInt8) -> Bool {
        ASCII.isAlphanumeric(byte)
            || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".")
            || byte == UInt8(ascii: "~") || byte == UInt8(ascii: "%")
    }

    public var description: String { self.value }

    public static func < (lhs: TopicName, rhs: TopicName) -> Bool { lhs.value < rhs.value }
}
