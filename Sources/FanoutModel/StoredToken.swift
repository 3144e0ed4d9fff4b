/// A registration token's bytes where the engine keeps them (its registry's packed storage), kept
/// alive by their owner: what a delivery carries instead of a `String` of its own, so that handing
/// out a delivery allocates nothing. The bytes never change once stored. A decoder's block of a
/// frame's tokens hands them out the same way (and a register batch's app ids: `HeldText`).
public struct StoredToken: @unchecked Sendable {
    // Safe to share: the owner keeps `start` alive and nothing writes those bytes again.
    @usableFromInline let owner: AnyObject
    @usableFromInline let start: UnsafeRawPointer
    /// The token's length in bytes.
    public let count: Int

    package init(owner: AnyObject, start: UnsafeRawPointer, count: Int) {
        self.owner = owner
        self.start = start
        self.count = count
    }

    /// Calls `body` with the token's bytes.
    @inlinable
    public func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try withExtendedLifetime(self.owner) { try body(UnsafeRawBufferPointer(start: self.start, count: self.count)) }
    }

    /// The token's bytes, valid only while this value (its owner) lives: for a caller that
    /// borrows the value holding it.
    @inlinable
    package var unsafeBytes: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: self.start, count: self.count)
    }

    /// The token as a value of its own (a copy of its bytes).
    public var token: RegistrationToken {
        self.withUnsafeBytes { RegistrationToken(validatedBytes: $0) }
    }
}
