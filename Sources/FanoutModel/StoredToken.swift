/// A registration token's bytes where the engine keeps them (its registry's packed storage), kept
/// alive by their owner: what a delivery carries instead of a `String` of its own, so that handing
/// out a delivery allocates nothing. The bytes never change once stored.
public struct StoredToken: @unchecked Sendable {
    // Safe to share: the owner keeps `start` alive and nothing writes those bytes again.
    private let owner: AnyObject
    /// Where the token's bytes start: valid while this value (or a copy of it) lives, for a caller
    /// that keeps the owner alive itself (a frame writer borrowing the delivery that holds it), so
    /// that reading the bytes does not retain and release the owner, a chunk every token stored
    /// near it shares with threads handing out other deliveries.
    package let start: UnsafeRawPointer
    /// The token's length in bytes.
    public let count: Int

    package init(owner: AnyObject, start: UnsafeRawPointer, count: Int) {
        self.owner = owner
        self.start = start
        self.count = count
    }

    /// Calls `body` with the token's bytes.
    public func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try withExtendedLifetime(self.owner) { try body(UnsafeRawBufferPointer(start: self.start, count: self.count)) }
    }

    /// The token as a value of its own (a copy of its bytes).
    public var token: RegistrationToken {
        self.withUnsafeBytes { RegistrationToken(validatedBytes: $0) }
    }
}
