internal import CFanoutIntrinsics

/// How a bitmap chunk of a `SlotSet` is turned into slots, ascending. Both decoders store several
/// lanes at a time, so the output needs room for 16 slots past the last member.
///
/// A storage detail, public only as `@_spi(Storage)` so that tests can check every decoder this
/// CPU runs against the others.
@_spi(Storage)
public enum SlotBitmapDecoder: Sendable {
    /// A byte at a time: one 8-lane store of the byte's precomputed bit positions.
    case byteTable
    /// Sixteen bits at a time with AVX-512's compress (C, `CFanoutIntrinsics`); only where the CPU has it.
    case avx512

    /// The fastest decoder this CPU runs.
    public static let best: SlotBitmapDecoder = fanout_simd_has_avx512() ? .avx512 : .byteTable

    /// Every decoder this CPU runs.
    public static var available: [SlotBitmapDecoder] { Self.best == .avx512 ? [.byteTable, .avx512] : [.byteTable] }

    /// Writes the slot of every set bit of `words` (bit `b` of word `w` is `base + 64 * w + b`) to
    /// `output`, ascending, and returns the end. `words` is a chunk's 1024-word bitmap.
    func decode(_ words: UnsafeBufferPointer<UInt64>, base: UInt32, to output: UnsafeMutablePointer<UInt32>) -> UnsafeMutablePointer<UInt32> {
        guard let start = words.baseAddress else { return output }
        switch self {
        case .avx512: return fanout_simd_decode_bitmap_avx512(start, words.count, base, output)
        case .byteTable: return Self.decodeByteAtATime(words, base: base, to: output)
        }
    }

    /// The two halves of the bitmap are decoded in one loop, each into its own part of `output`
    /// (the second starts after the first half's popcount): each half's output pointer is a chain
    /// of dependent additions, and two chains run side by side where one would stall on its own.
    private static func decodeByteAtATime(_ words: UnsafeBufferPointer<UInt64>, base: UInt32, to output: UnsafeMutablePointer<UInt32>) -> UnsafeMutablePointer<UInt32> {
        Self.byteOffsets.withUnsafeBufferPointer { table in
            let half = words.count / 2
            var firstHalfCount = 0
            for index in 0..<half { firstHalfCount &+= words[index].nonzeroBitCount }
            let secondStart = output + firstHalfCount
            var first = output
            var second = secondStart
            var firstBase = SIMD8<UInt32>(repeating: base)
            var secondBase = SIMD8<UInt32>(repeating: base | UInt32(half << 6))
            for index in 0..<half {
                var a = words[index]
                var b = words[half + index]
                for _ in 0..<8 {
                    let byteA = Int(truncatingIfNeeded: a & 0xFF)
                    let byteB = Int(truncatingIfNeeded: b & 0xFF)
                    UnsafeMutableRawPointer(first).storeBytes(of: table[byteA] &+ firstBase, as: SIMD8<UInt32>.self)
                    UnsafeMutableRawPointer(second).storeBytes(of: table[byteB] &+ secondBase, as: SIMD8<UInt32>.self)
                    first += byteA.nonzeroBitCount
                    second += byteB.nonzeroBitCount
                    a >>= 8
                    b >>= 8
                    firstBase &+= 8
                    secondBase &+= 8
                }
            }
            // The first half's stores reached up to 8 slots into the second's: write those again.
            var fixed = secondStart
            let fixEnd = min(secondStart + 8, second)
            var index = half
            while fixed < fixEnd, index < words.count {
                var word = words[index]
                while word != 0, fixed < fixEnd {
                    fixed.pointee = base | UInt32(index << 6 | word.trailingZeroBitCount)
                    fixed += 1
                    word &= word &- 1
                }
                index += 1
            }
            return second
        }
    }

    /// For each byte value, the positions of its set bits, ascending, in the first lanes.
    private static let byteOffsets: [SIMD8<UInt32>] = (0..<256).map { byte in
        var lanes = SIMD8<UInt32>()
        var lane = 0
        for bit in 0..<8 where byte & (1 << bit) != 0 {
            lanes[lane] = UInt32(bit)
            lane += 1
        }
        return lanes
    }
}
