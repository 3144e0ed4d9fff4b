/// A project (tenant) id, as Google Cloud spells them: 6...30 characters of lowercase letters,
/// digits and `-`, starting with a letter and not ending with `-` (`my-app-1234`); or, for legacy
/// support as FCM allows, a numeric project number of 1...20 digits.
public struct ProjectID: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The project that exists in every engine, so that the simple case needs no setup.
    public static let `default` = ProjectID(uncheckedValue: "default")

    public let value: String

    /// Validates `value`; `nil` when it is not a project id.
    public init?(_ value: String) {
        guard Self.isValid(value) else { return nil }
        self.value = value
    }

    private init(uncheckedValue: String) {
        self.value = uncheckedValue
    }

    /// Read in place: every request names its project, and an array of its bytes was an allocation each.
    private static func isValid(_ value: String) -> Bool {
        var value = value
        return value.withUTF8 { Self.isValid(bytes: $0) }
    }

    private static func isValid(bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        if !bytes.isEmpty && bytes.count <= 20 && bytes.allSatisfy(ASCII.isDigit) {
            return true
        }
        guard bytes.count >= 6 && bytes.count <= 30 else { return false }
        func isLowerOrDigit(_ byte: UInt8) -> Bool {
            (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || ASCII.isDigit(byte)
        }
        guard bytes[0] >= UInt8(ascii: "a") && bytes[0] <= UInt8(ascii: "z") else { return false }
        guard bytes.last != UInt8(ascii: "-") else { return false }
        return bytes.allSatisfy { isLowerOrDigit($0) || $0 == UInt8(ascii: "-") }
    }

    public var description: String { self.value }

    public static func < (lhs: ProjectID, rhs: ProjectID) -> Bool { lhs.value < rhs.value }
}
