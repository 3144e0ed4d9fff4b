internal import CFanoutLZ4

/// LZ4 block compression (system liblz4) with every size checked before it is trusted.
enum LZ4 {
    /// The largest input accepted (liblz4's own limit is just under 2 GiB).
    static let maximumInputSize = Int(LZ4_MAX_INPUT_SIZE)

    /// The compressed block, or `nil` when `bytes` is too large.
    static func compress(_ bytes: [UInt8]) -> [UInt8]? {
        guard bytes.count <= self.maximumInputSize else { return nil }
        let bound = Int(LZ4_compressBound(Int32(bytes.count)))
        var output = [UInt8](repeating: 0, count: bound)
        let written = bytes.withUnsafeBytes { input in
            output.withUnsafeMutableBytes { out in
                LZ4_compress_default(
                    input.baseAddress?.assumingMemoryBound(to: CChar.self),
                    out.baseAddress?.assumingMemoryBound(to: CChar.self),
                    Int32(bytes.count),
                    Int32(bound)
                )
            }
        }
        guard written > 0 || bytes.isEmpty else { return nil }
        output.removeSubrange(Int(written)...)
        return output
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
