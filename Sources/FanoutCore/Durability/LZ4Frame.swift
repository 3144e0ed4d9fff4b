internal import CFanoutLZ4

/// LZ4 frame format (liblz4's `LZ4F_*`), the format of snapshot files, so that the stock
/// `lz4 -t` can test one. Content checksums are on.
enum LZ4Frame {
    struct Error: Swift.Error, CustomStringConvertible {
        var description: String
    }

    /// Compresses `chunks` (produced lazily) into one frame, handing each piece of output to `sink`.
    static func compress(
        _ produceChunk: () throws -> [UInt8]?,
        into sink: ([UInt8]) throws -> Void
    ) throws {
        var context: OpaquePointer? = nil
        guard LZ4F_isError(LZ4F_createCompressionContext(&context, UInt32(LZ4F_VERSION))) == 0, let context else {
            throw Error(description: "cannot create an LZ4 frame context")
        }
        defer { LZ4F_freeCompressionContext(context) }
        var preferences = LZ4F_preferences_t()
        preferences.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled
        var output = [UInt8](repeating: 0, count: 64)  // LZ4F_HEADER_SIZE_MAX is 19
        let header = output.withUnsafeMutableBytes { LZ4F_compressBegin(context, $0.baseAddress, $0.count, &preferences) }
        guard LZ4F_isError(header) == 0 else { throw Error(description: "LZ4F_compressBegin failed") }
        try sink(Array(output[0..<header]))
        while let chunk = try produceChunk() {
            let bound = LZ4F_compressBound(chunk.count, &preferences)
            if output.count < bound { output = [UInt8](repeating: 0, count: bound) }
            let written = output.withUnsafeMutableBytes { out in
                chunk.withUnsafeBytes { input in
                    LZ4F_compressUpdate(context, out.baseAddress, out.count, input.baseAddress, input.count, nil)
                }
            }
            guard LZ4F_isError(written) == 0 else { throw Error(description: "LZ4F_compressUpdate failed") }
            if written > 0 { try sink(Array(output[0..<written])) }
        }
        let bound = LZ4F_compressBound(0, &preferences)
        if output.count < bound { output = [UInt8](repeating: 0, count: bound) }
        let end = output.withUnsafeMutableBytes { LZ4F_compressEnd(context, $0.baseAddress, $0.count, nil) }
        guard LZ4F_isError(end) == 0 else { throw Error(description: "LZ4F_compressEnd failed") }
        try sink(Array(output[0..<end]))
    }

    /// Decompresses a whole frame; refuses to produce more than `limit` bytes.
    static func decompress(_ frame: [UInt8], limit: Int) throws -> [UInt8] {
        var context: OpaquePointer? = nil
        guard LZ4F_isError(LZ4F_createDecompressionContext(&context, UInt32(LZ4F_VERSION))) == 0, let context else {
            throw Error(description: "cannot create an LZ4 frame context")
        }
        defer { LZ4F_freeDecompressionContext(context) }
        var result: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        var consumed = 0
        while true {
            var sourceSize = frame.count - consumed
            var destinationSize = chunk.count
            let hint = frame.withUnsafeBytes { input in
                chunk.withUnsafeMutableBytes { out in
                    LZ4F_decompress(context, out.baseAddress, &destinationSize, input.baseAddress! + consumed, &sourceSize, nil)
                }
            }
            guard LZ4F_isError(hint) == 0 else {
                throw Error(description: "not a valid LZ4 frame (\(String(cString: LZ4F_getErrorName(hint))))")
            }
            consumed += sourceSize
            result.append(contentsOf: chunk[0..<destinationSize])
            guard result.count <= limit else { throw Error(description: "the frame expands past \(limit) bytes") }
            if hint == 0 { break }  // the frame is complete and its checksum verified
            if sourceSize == 0 && destinationSize == 0 {
                throw Error(description: "the LZ4 frame is truncated")
            }
        }
        return result
    }
}
