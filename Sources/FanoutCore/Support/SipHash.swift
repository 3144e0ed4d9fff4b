internal import CFanoutIntrinsics

/// SipHash (Aumasson and Bernstein), keyed: the token index's hash. A client chooses its tokens,
/// so the index needs a hash whose collisions cannot be found without the key, as `Hasher` gives;
/// `Hasher` is SipHash-1-3 too, but streams its input through a tail buffer: 136 ns for a 163-byte
/// token here, against 52-56 ns for this loop over whole 8-byte words (docs/performance.md).
package struct SipHash: Sendable {
    private let key: (UInt64, UInt64)

    package init(key: (UInt64, UInt64)) {
        self.key = key
    }

    /// The key of this process's token indexes: random at start, like `Hasher`'s seed (nothing
    /// built with it is persisted or shared between processes).
    package static let process = SipHash(key: (UInt64.random(in: .min ... .max), UInt64.random(in: .min ... .max)))

    /// SipHash-1-3 of `bytes` (one round per word, three to finish): Swift's and Rust's choice
    /// for hash tables.
    @inline(__always)
    package func hash13(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        self.hash(bytes, compressionRounds: 1, finalizationRounds: 3)
    }

    /// SipHash-1-3 of each of `ranges` of `bytes`, in order: what `hash13` gives each, eight at a
    /// time where `implementation` is AVX-512 (a batch's tokens: more than twice as fast, as the
    /// rounds of eight messages run side by side in one register's lanes).
    package func hashes13(of ranges: [Range<Int>], in bytes: UnsafeRawBufferPointer, using implementation: Batches = .best) -> [UInt64] {
        var hashes = [UInt64](repeating: 0, count: ranges.count)
        var done = 0
        if implementation == .avx512, let base = bytes.baseAddress {
            withUnsafeTemporaryAllocation(of: UnsafePointer<UInt8>?.self, capacity: 8) { messages in
                withUnsafeTemporaryAllocation(of: Int.self, capacity: 8) { lengths in
                    hashes.withUnsafeMutableBufferPointer { hashes in
                        while done + 8 <= ranges.count {
                            for lane in 0..<8 {
                                let range = ranges[done + lane]
                                messages[lane] = (base + range.lowerBound).assumingMemoryBound(to: UInt8.self)
                                lengths[lane] = range.count
                            }
                            fanout_siphash13_x8_avx512(self.key.0, self.key.1, messages.baseAddress, lengths.baseAddress, hashes.baseAddress! + done)
                            done += 8
                        }
                    }
                }
            }
        }
        for index in done..<ranges.count {
            hashes[index] = self.hash13(UnsafeRawBufferPointer(rebasing: bytes[ranges[index]]))
        }
        return hashes
    }

    /// How `hashes13` hashes a batch.
    package enum Batches: Sendable {
        /// One message after another, as `hash13`.
        case oneAtATime
        /// Eight messages at once with AVX-512 (C, `CFanoutIntrinsics`); only where the CPU has it.
        case avx512

        /// The fastest way this CPU runs.
        package static let best: Batches = fanout_simd_has_avx512() ? .avx512 : .oneAtATime

        /// Every way this CPU runs.
        package static var available: [Batches] { Self.best == .avx512 ? [.oneAtATime, .avx512] : [.oneAtATime] }
    }

    /// SipHash-c-d of `bytes`: the reference vectors are SipHash-2-4's, so the tests check the
    /// construction through this, and `hash13` is the same code with its constants.
    @inline(__always)
    package func hash(_ bytes: UnsafeRawBufferPointer, compressionRounds: Int, finalizationRounds: Int) -> UInt64 {
        var state = State(key: self.key)
        let count = bytes.count
        let wholeWords = count & ~7
        var offset = 0
        while offset < wholeWords {
            let word = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
            state.absorb(word, rounds: compressionRounds)
            offset += 8
        }
        // The last word: the tail's bytes, little-endian, under the length's low byte.
        var last = UInt64(truncatingIfNeeded: count) << 56
        var shift: UInt64 = 0
        while offset < count {
            last |= UInt64(bytes[offset]) << shift
            shift += 8
            offset += 1
        }
        state.absorb(last, rounds: compressionRounds)
        state.v2 ^= 0xff
        for _ in 0..<finalizationRounds { state.round() }
        return state.v0 ^ state.v1 ^ state.v2 ^ state.v3
    }

    private struct State {
        var v0: UInt64
        var v1: UInt64
        var v2: UInt64
        var v3: UInt64

        @inline(__always)
        init(key: (UInt64, UInt64)) {
            // "somepseudorandomlygeneratedbytes"
            self.v0 = 0x736f_6d65_7073_6575 ^ key.0
            self.v1 = 0x646f_7261_6e64_6f6d ^ key.1
            self.v2 = 0x6c79_6765_6e65_7261 ^ key.0
            self.v3 = 0x7465_6462_7974_6573 ^ key.1
        }

        @inline(__always)
        mutating func absorb(_ word: UInt64, rounds: Int) {
            self.v3 ^= word
            for _ in 0..<rounds { self.round() }
            self.v0 ^= word
        }

        @inline(__always)
        mutating func round() {
            self.v0 &+= self.v1
            self.v1 = self.v1.rotatedLeft(13) ^ self.v0
            self.v0 = self.v0.rotatedLeft(32)
            self.v2 &+= self.v3
            self.v3 = self.v3.rotatedLeft(16) ^ self.v2
            self.v0 &+= self.v3
            self.v3 = self.v3.rotatedLeft(21) ^ self.v0
            self.v2 &+= self.v1
            self.v1 = self.v1.rotatedLeft(17) ^ self.v2
            self.v2 = self.v2.rotatedLeft(32)
        }
    }
}

extension UInt64 {
    @inline(__always)
    fileprivate func rotatedLeft(_ bits: UInt64) -> UInt64 {
        (self << bits) | (self >> (64 &- bits))
    }
}
