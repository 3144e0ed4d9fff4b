internal import CFanoutLZ4

/// LZ4 block compression (system liblz4) with every size checked before it is trusted.
enum LZ4 {
    /// The largest input accepted (liblz4's own limit is just under 2 GiB).
    static let maximumInputSize = Int(LZ4_MAX_INPUT_SIZE)

    /// The most bytes compressing `count` bytes can take (`count` at most `maximumInputSize`).
    static func compressBound(_ count: Int) -> Int {
        Int(LZ4_compressBound(Int32(count)))
    }

    /// Compresses `input` into `output` (at least `compressBound(input.count)` bytes); returns the
    /// compressed size, or `nil` when `input` is too large or the block does not fit.
    /// `acceleration` (liblz4's, at least 1) trades ratio for speed: the block format is the same.
    static func compress(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer, acceleration: Int32 = 1) -> Int? {
        guard input.count <= self.maximumInputSize, output.count <= Int(Int32.max) else { return nil }
        let written = LZ4_compress_fast(
            input.baseAddress?.assumingMemoryBound(to: CChar.self),
            output.baseAddress?.assumingMemoryBound(to: CChar.self),
            Int32(input.count),
            Int32(output.count),
            max(acceleration, 1)
        )
        guard written > 0 || input.isEmpty else { return nil }
        return Int(written)
    }

    /// Decompresses a block that must expand to exactly `originalSize` bytes; `nil` when it is
    /// malformed, when it does not, or when `originalSize` exceeds `limit` (checked first).
    static func decompress(_ block: UnsafeRawBufferPointer, originalSize: Int, limit: Int) -> [UInt8]? {
        guard originalSize >= 0, originalSize <= limit, originalSize <= self.maximumInputSize,
            block.count <= Int(Int32.max)
        else { return nil }
        var output = [UInt8](repeating: 0, count: originalSize)
        let written = output.withUnsafeMutableBytes { out in
            LZ4_decompress_safe(
                block.baseAddress?.assumingMemoryBound(to: CChar.self),
                out.baseAddress?.assumingMemoryBound(to: CChar.self),
                Int32(block.count),
                Int32(originalSize)
            )
        }
        return written == Int32(originalSize) ? output : nil
    }
}
