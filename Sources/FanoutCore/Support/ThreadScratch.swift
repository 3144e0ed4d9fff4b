#if canImport(Glibc)
import Glibc
#endif

/// Scratch memory kept per thread and lent for the length of a call. Parsing a message and
/// rendering it each need a few KiB for a moment (the parser's entries, the writer's buffer);
/// taking them from `malloc` and giving them back every time cost more than 2% of the work.
///
/// Each thread that asks keeps one block of `blockSize` bytes until it exits. A call asking for
/// more, or made while its thread's block is lent out (a nested call), gets memory of its own,
/// freed after the call.
enum ThreadScratch {
    /// The bytes each thread keeps: room for the parser's entries (8 bytes per input byte) of a
    /// send body of up to 8,191 bytes, and for the rendering buffer.
    static let blockSize = 64 * 1024

    /// The slot holding each thread's block; `nil` if no key could be made (then every call allocates).
    private static let key: pthread_key_t? = {
        var key = pthread_key_t()
        // A thread's block is freed when the thread exits.
        guard pthread_key_create(&key, { free($0) }) == 0 else { return nil }
        return key
    }()

    /// A block starts with a header saying whether it is lent out; the bytes lent follow it.
    private static let headerSize = 16

    /// Calls `body` with `byteCount` bytes of uninitialized memory aligned to 16 bytes, valid only
    /// during the call.
    static func withBytes<Result, Failure>(
        _ byteCount: Int,
        _ body: (UnsafeMutableRawBufferPointer) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        guard byteCount <= Self.blockSize, let block = Self.block(), !block.load(as: Bool.self) else {
            let memory = UnsafeMutableRawBufferPointer.allocate(byteCount: byteCount, alignment: 16)
            defer { memory.deallocate() }
            return try body(memory)
        }
        block.storeBytes(of: true, as: Bool.self)
        defer { block.storeBytes(of: false, as: Bool.self) }
        return try body(UnsafeMutableRawBufferPointer(start: block + Self.headerSize, count: byteCount))
    }

    /// The calling thread's block, made on first use; `nil` if it cannot be.
    @inline(__always)
    private static func block() -> UnsafeMutableRawPointer? {
        guard let key = Self.key else { return nil }
        if let block = pthread_getspecific(key) { return block }
        // malloc aligns to 16 bytes on the platforms Swift runs on.
        guard let block = malloc(Self.headerSize + Self.blockSize) else { return nil }
        guard pthread_setspecific(key, block) == 0 else {
            free(block)
            return nil
        }
        block.storeBytes(of: false, as: Bool.self)
        return block
    }
}
