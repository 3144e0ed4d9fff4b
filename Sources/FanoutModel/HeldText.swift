#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Text a value holds: a `String`, or bytes a block keeps (`StoredToken`: a register batch's
/// decoder copies its items' tokens and app ids into one block per frame, where a `String` each
/// was an allocation, and a retain and release of a different object at every step from the
/// frame to the log). Equal, and hashed alike, when the bytes are, whichever way each is held.
@usableFromInline
package enum HeldText: Hashable, Sendable {
    case string(String)
    case kept(StoredToken)

    /// The text (made from the kept bytes, for bytes a block keeps).
    package var string: String {
        switch self {
        case .string(let string): string
        case .kept(let kept): kept.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        }
    }

    /// Calls `body` with the text's UTF-8 bytes, in place. Kept bytes are read without retaining
    /// their block (`self` holds it for the call): the log's writer reads a batch's tokens while
    /// the event loop that decoded them lets go of its own references to the same block, and
    /// both counting on one reference count made its cache line bounce between the cores.
    @inlinable
    package func withUTF8<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        switch self {
        case .string(let string):
            if let result = try string.utf8.withContiguousStorageIfAvailable({ try body(UnsafeRawBufferPointer($0)) }) {
                return result
            }
            var string = string
            return try string.withUTF8 { try body(UnsafeRawBufferPointer($0)) }
        case .kept(let kept):
            return try body(kept.unsafeBytes)
        }
    }

    /// The text's length in UTF-8 bytes.
    package var utf8Count: Int {
        switch self {
        case .string(let string): string.utf8.count
        case .kept(let kept): kept.count
        }
    }

    @usableFromInline
    package static func == (left: HeldText, right: HeldText) -> Bool {
        if case .string(let left) = left, case .string(let right) = right { return left == right }
        return left.withUTF8 { left in right.withUTF8 { right in Self.equalBytes(left, right) } }
    }

    /// Whether two byte ranges hold the same bytes (`memcmp`, not a loop over each byte).
    package static func equalBytes(_ left: UnsafeRawBufferPointer, _ right: UnsafeRawBufferPointer) -> Bool {
        guard left.count == right.count else { return false }
        guard let first = left.baseAddress, let second = right.baseAddress else { return true }
        return memcmp(first, second, left.count) == 0
    }

    @usableFromInline
    package func hash(into hasher: inout Hasher) {
        self.withUTF8 { hasher.combine(bytes: $0) }
    }
}
