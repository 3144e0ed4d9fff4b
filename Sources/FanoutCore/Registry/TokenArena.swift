internal import CFanoutIntrinsics
import Synchronization

/// Where a token's entry is in a `TokenArena`: its chunk (12 bits) and its byte offset there (20
/// bits), or `none`. Four bytes, where a `RegistrationToken?` in a record would be sixteen and its
/// `String` ~200 more on the heap.
struct TokenReference: Equatable {
    let rawValue: UInt32

    static let none = TokenReference(rawValue: .max)

    private init(rawValue: UInt32) {
        self.rawValue = rawValue
    }

    init(chunk: Int, offset: Int) {
        self.rawValue = UInt32(chunk) << 20 | UInt32(offset)
    }

    var chunk: Int { Int(self.rawValue >> 20) }
    var offset: Int { Int(self.rawValue & 0xF_FFFF) }
}

/// Where a token's entry is in memory: valid while its chunk lives. Made without reading the
/// entry (a hand-out records where the token is; the frame writer reads it once, through
/// `TokenArena.bytes(ofEntry:)`).
struct TokenLocation {
    /// The chunk's index in its arena, and its bytes (which tell a reused index apart).
    let chunk: Int
    let chunkBytes: UnsafeRawPointer
    /// The entry: its header, then the token's bytes.
    let entry: UnsafeRawPointer
}

/// One megabyte of token entries. Bytes once written never change, so a copy of the arena (a
/// snapshot's copy of the project's state) reads what it referenced while the original appends;
/// appends claim their range atomically, so two copies that both append never write the same
/// bytes (the second one to claim starts a chunk of its own).
final class TokenChunk: @unchecked Sendable {
    static let capacity = 1 << 20

    let bytes: UnsafeMutableRawPointer
    /// How far any copy of the arena has claimed this chunk.
    let claimed = Atomic<Int>(0)

    init() {
        self.bytes = .allocate(byteCount: Self.capacity, alignment: 16)
    }

    deinit {
        self.bytes.deallocate()
    }
}

/// The registration tokens of a registry, packed: each token is an entry of 6 bytes of header
/// (its slot, its length) and its bytes, appended to the last of a list of 1 MiB chunks. A
/// 163-byte token takes 169 bytes, where a `String` takes a 208-byte heap block of its own.
///
/// A released token's bytes stay until its chunk is evacuated: once no more than a quarter of a
/// full chunk's bytes are still referenced, the registry moves those entries to the last chunk
/// (`evacuationCandidates`, `entries(inChunk:)`) and the chunk goes. That is at most 256 KiB
/// moved at a time, paid for by the 768 KiB released before it: no pause grows with the registry.
///
/// A value: copies share chunks, and each appends only past what every copy has claimed.
struct TokenArena {
    /// The chunks by index (`nil`: free, its index reusable).
    private var chunks: [TokenChunk?] = []
    /// How far this copy has written each chunk.
    private var written: [Int] = []
    /// The bytes of each chunk's entries still referenced.
    private var live: [Int] = []
    private var freeIndices: [Int] = []
    /// The chunk appends go to.
    private var tail: Int?
    /// Chunks at most a quarter live, waiting to be evacuated by the registry.
    private(set) var evacuationCandidates: [Int] = []

    static let entryHeaderSize = 6

    /// The most chunks an arena holds (4 GiB): chunk 4095 would make `TokenReference.none`.
    static let maximumChunkCount = 4095

    /// Bytes of all the chunks held (for memory figures).
    var allocatedBytes: Int { (self.chunks.count - self.freeIndices.count) * TokenChunk.capacity }

    /// Whether a token can be appended, with room left for an evacuation (which starts a chunk
    /// before it frees one): false when the arena is two chunks short of its most.
    var hasRoom: Bool { self.chunks.count - self.freeIndices.count < Self.maximumChunkCount - 2 }

    /// Appends `token` (at most `TokenChunk.capacity - 6` bytes) for `slot`.
    mutating func append(_ token: UnsafeRawBufferPointer, slot: UInt32) -> TokenReference {
        let size = Self.entryHeaderSize + token.count
        if self.tail == nil || !self.claim(size, in: self.tail!) {
            self.startChunk()
            // A fresh chunk is this copy's alone.
            _ = self.claim(size, in: self.tail!)
        }
        let chunk = self.tail!
        let offset = self.written[chunk] - size
        let start = self.chunks[chunk]!.bytes + offset
        start.storeBytes(of: slot.littleEndian, as: UInt32.self)
        (start + 4).storeBytes(of: UInt16(token.count).littleEndian, as: UInt16.self)
        if let base = token.baseAddress { (start + Self.entryHeaderSize).copyMemory(from: base, byteCount: token.count) }
        self.live[chunk] += size
        return TokenReference(chunk: chunk, offset: offset)
    }

    /// The token `reference` names stops being referenced; its chunk may become a candidate.
    mutating func release(_ reference: TokenReference) {
        let chunk = reference.chunk
        let wasCandidate = self.isCandidate(chunk)
        self.live[chunk] -= Self.entryHeaderSize + Self.tokenLength(at: self.address(of: reference))
        if !wasCandidate && self.isCandidate(chunk) { self.evacuationCandidates.append(chunk) }
    }

    /// Calls `body` with the bytes of the token `reference` names.
    @inline(__always)
    func withBytes<Result>(_ reference: TokenReference, _ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try body(Self.bytes(ofEntry: self.address(of: reference)))
    }

    /// The token `reference` names, as its bytes in place with their chunk kept alive.
    func storedToken(_ reference: TokenReference) -> StoredToken {
        let bytes = Self.bytes(ofEntry: self.address(of: reference))
        return StoredToken(owner: self.chunks[reference.chunk].unsafelyUnwrapped, start: bytes.baseAddress!, count: bytes.count)
    }

    /// The token's bytes in the entry at `entry` (read from its header), valid while its chunk lives.
    @inline(__always)
    static func bytes(ofEntry entry: UnsafeRawPointer) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: entry + Self.entryHeaderSize, count: Self.tokenLength(at: entry))
    }

    /// Asks the CPU for the first 192 bytes of the entry at `entry` (its header and a 163-byte FCM
    /// token), without waiting: every line they touch, three or four as the entry starts in its
    /// line. (Three lines from `entry` missed the last line of most 169-byte entries, whose token
    /// tail a lookup's compare then waited for.)
    static func prefetch(entry: UnsafeRawPointer) {
        let start = Int(bitPattern: entry)
        for line in stride(from: start & ~63, to: start + 192, by: 64) {
            fanout_prefetch(UnsafeRawPointer(bitPattern: line))
        }
    }

    /// Where the token `reference` names is, for a caller that keeps its chunk alive itself.
    func location(_ reference: TokenReference) -> TokenLocation {
        let chunkBytes = UnsafeRawPointer(self.chunks[reference.chunk].unsafelyUnwrapped.bytes)
        return TokenLocation(chunk: reference.chunk, chunkBytes: chunkBytes, entry: chunkBytes + reference.offset)
    }

    /// Chunk `index` (one that holds a live token).
    func chunk(_ index: Int) -> TokenChunk {
        self.chunks[index].unsafelyUnwrapped
    }

    /// The address of a token's entry (its header), also to prefetch.
    @inline(__always)
    func address(of reference: TokenReference) -> UnsafeRawPointer {
        UnsafeRawPointer(self.chunks[reference.chunk].unsafelyUnwrapped.bytes + reference.offset)
    }

    /// The entries written in `chunk`, each with the slot it was appended for; the registry keeps
    /// those its records still reference.
    func entries(inChunk chunk: Int) -> [(slot: UInt32, reference: TokenReference)] {
        guard let bytes = self.chunks[chunk]?.bytes else { return [] }
        var result: [(slot: UInt32, reference: TokenReference)] = []
        var offset = 0
        while offset < self.written[chunk] {
            let entry = UnsafeRawPointer(bytes + offset)
            result.append((UInt32(littleEndian: entry.loadUnaligned(as: UInt32.self)), TokenReference(chunk: chunk, offset: offset)))
            offset += Self.entryHeaderSize + Self.tokenLength(at: entry)
        }
        return result
    }

    /// Frees an evacuated chunk (every entry of it released or moved) and forgets it as a candidate.
    mutating func drop(chunk: Int) {
        self.evacuationCandidates.removeAll { $0 == chunk }
        guard self.chunks[chunk] != nil, chunk != self.tail else { return }
        self.chunks[chunk] = nil
        self.written[chunk] = 0
        self.live[chunk] = 0
        self.freeIndices.append(chunk)
    }

    // MARK: - Helpers

    /// The token length in the header of the entry at `entry` (after its 4-byte slot).
    @inline(__always)
    private static func tokenLength(at entry: UnsafeRawPointer) -> Int {
        Int(UInt16(littleEndian: (entry + 4).loadUnaligned(as: UInt16.self)))
    }

    /// A full chunk (not the tail) with at most a quarter of its bytes live.
    private func isCandidate(_ chunk: Int) -> Bool {
        chunk != self.tail && self.live[chunk] * 4 <= self.written[chunk]
    }

    /// Claims `size` bytes past what this copy wrote in `chunk`, if no other copy has, and they fit.
    private mutating func claim(_ size: Int, in chunk: Int) -> Bool {
        let from = self.written[chunk]
        guard from + size <= TokenChunk.capacity,
            self.chunks[chunk]!.claimed.compareExchange(expected: from, desired: from + size, ordering: .relaxed).exchanged
        else { return false }
        self.written[chunk] = from + size
        return true
    }

    private mutating func startChunk() {
        let previous = self.tail
        let index: Int
        if let free = self.freeIndices.popLast() {
            index = free
            self.chunks[index] = TokenChunk()
        } else {
            index = self.chunks.count
            self.chunks.append(TokenChunk())
            self.written.append(0)
            self.live.append(0)
        }
        self.tail = index
        // The chunk filled before may already be mostly released.
        if let previous, self.isCandidate(previous), !self.evacuationCandidates.contains(previous) {
            self.evacuationCandidates.append(previous)
        }
    }
}
