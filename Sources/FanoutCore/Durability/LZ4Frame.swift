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

    /// Decompresses a frame a piece at a time, so that a reader can work on the start of the
    /// content before the rest is expanded, and reads a file's frame a piece at a time too. The
    /// end of the frame (`next()` returning `nil`) is reached only once its content checksum has
    /// been verified and nothing follows it.
    final class Decompressor {
        /// The frame's bytes being decompressed: all of it, or the file's current piece.
        private var input: [UInt8]
        /// Replaces `input` with the frame's next bytes; leaves it empty at the end.
        private let refill: (inout [UInt8]) throws -> Void
        private var inputEnded = false
        private let limit: Int
        private let context: OpaquePointer
        private var consumed = 0
        private var produced = 0
        private var isComplete = false
        private var chunk = [UInt8](repeating: 0, count: 1 << 20)

        /// A decompressor of `frame` that refuses to produce more than `limit` bytes in all.
        convenience init(_ frame: [UInt8], limit: Int) throws {
            try self.init(input: frame, limit: limit) { $0.removeAll() }
        }

        /// A decompressor of the frame that is the file at `path`, read a MiB at a time (read
        /// whole, a snapshot's compressed bytes, over a quarter of the state's size, were held
        /// until the last record was decoded), that refuses to produce more than `limit` bytes in all.
        convenience init(reading path: String, limit: Int) throws {
            let reader = try FileIO.PieceReader(path)
            try self.init(input: [], limit: limit) { $0 = try reader.next(1 << 20) }
        }

        private init(input: [UInt8], limit: Int, refill: @escaping (inout [UInt8]) throws -> Void) throws {
            var context: OpaquePointer? = nil
            guard LZ4F_isError(LZ4F_createDecompressionContext(&context, UInt32(LZ4F_VERSION))) == 0, let context else {
                throw Error(description: "cannot create an LZ4 frame context")
            }
            self.input = input
            self.refill = refill
            self.limit = limit
            self.context = context
        }

        deinit {
            LZ4F_freeDecompressionContext(self.context)
        }

        /// Takes the frame's next bytes once the current ones are used up; false at its end.
        private func hasInput() throws -> Bool {
            if self.consumed < self.input.count { return true }
            guard !self.inputEnded else { return false }
            try self.refill(&self.input)
            self.consumed = 0
            self.inputEnded = self.input.isEmpty
            return !self.inputEnded
        }

        /// The next piece of content (at most 1 MiB), or `nil` at the verified end of the frame.
        func next() throws -> ArraySlice<UInt8>? {
            while !self.isComplete {
                // With no input left, the decompressor may still hold output to hand over.
                let hasInput = try self.hasInput()
                var sourceSize = self.input.count - self.consumed
                var destinationSize = self.chunk.count
                let consumed = self.consumed
                let hint = self.input.withUnsafeBytes { input in
                    self.chunk.withUnsafeMutableBytes { out in
                        LZ4F_decompress(self.context, out.baseAddress, &destinationSize, input.baseAddress.map { $0 + consumed }, &sourceSize, nil)
                    }
                }
                guard LZ4F_isError(hint) == 0 else {
                    throw Error(description: "not a valid LZ4 frame (\(String(cString: LZ4F_getErrorName(hint))))")
                }
                self.consumed += sourceSize
                self.produced += destinationSize
                guard self.produced <= self.limit else { throw Error(description: "the frame expands past \(self.limit) bytes") }
                self.isComplete = hint == 0  // the frame is complete and its checksum verified
                if self.isComplete, try self.hasInput() {
                    throw Error(description: "bytes follow the end of the LZ4 frame")
                }
                if !self.isComplete && sourceSize == 0 && destinationSize == 0 {
                    throw Error(description: hasInput ? "the LZ4 frame stopped decoding" : "the LZ4 frame is truncated")
                }
                if destinationSize > 0 { return self.chunk[0..<destinationSize] }
            }
            return nil
        }
    }
}
