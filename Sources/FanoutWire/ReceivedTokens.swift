internal import FanoutModel

/// The registration tokens of one frame's items (a DELIVERIES frame's recipients; a register
/// batch's registrations, with their app ids), copied into one block they share (each holds a
/// `StoredToken` into it): decoding a frame makes one allocation for its tokens, where a `String`
/// per delivery was a quarter of a delivery worker's CPU.
final class ReceivedTokens: @unchecked Sendable {
    // Safe to share: bytes are written only while their frame is decoded, before any delivery
    // holding them leaves the decoder, and never again.
    private let bytes: UnsafeMutableRawPointer
    private let capacity: Int
    private var used = 0

    /// A block of `capacity` bytes: the frame's bytes left to decode, which hold all its tokens.
    init(capacity: Int) {
        self.capacity = capacity
        self.bytes = .allocate(byteCount: max(capacity, 1), alignment: 1)
    }

    deinit {
        self.bytes.deallocate()
    }

    /// Copies `token` in and returns where it is kept; nil when the block has no room left.
    func keep(_ token: UnsafeRawBufferPointer) -> StoredToken? {
        guard token.count <= self.capacity - self.used, let source = token.baseAddress else { return nil }
        let start = self.bytes + self.used
        start.copyMemory(from: source, byteCount: token.count)
        self.used += token.count
        return StoredToken(owner: self, start: UnsafeRawPointer(start), count: token.count)
    }
}
