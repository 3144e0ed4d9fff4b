package import NIOCore

/// The frames in a connection's bytes: what the socket brought and is not decoded yet, and the
/// whole frames in it, in order. A header is checked (version, flags, size) as soon as its 12
/// bytes are there, before its payload is waited for (`FrameDecoder`).
///
/// The server's and the client's handlers decode with it instead of a `ByteToMessageHandler` in
/// front, whose generic decode loop ran unspecialized and boxed every frame in an `NIOAny`; they
/// call `nextRequest` and `nextReply`, compiled here for their message type (a call from another
/// module to generic code is not specialized: its metadata is looked up at run time).
package struct FrameReader<Message: WireMessage> {
    private var decoder: FrameDecoder<Message>
    /// The bytes of the latest reads not decoded yet: whole frames, then at most the start of one.
    private var unread: ByteBuffer?
    /// A frame whose bytes came in more than one read, gathered in a buffer of its own. Only its
    /// bytes are copied: the whole frames after it are decoded where the read put them (joining
    /// each read to the partial frame before it copied every byte of a pipelining client's
    /// SUBSCRIBEs, and of a worker's DELIVERIES frames, once more).
    private var gathered: ByteBuffer?

    package init(maximumPayloadSize: Int) {
        self.decoder = FrameDecoder(maximumPayloadSize: maximumPayloadSize)
    }

    /// Some bytes have not been decoded: at the end of the input, a frame cut short.
    package var hasUnread: Bool { self.unread != nil || self.gathered != nil }

    /// The bytes the reader's buffers hold room for (0 with nothing unread): what a connection's
    /// input costs in memory.
    package var bufferCapacity: Int { (self.unread?.capacity ?? 0) + (self.gathered?.capacity ?? 0) }

    /// Adds what the socket brought after what is unread.
    package mutating func append(_ bytes: inout ByteBuffer) {
        guard var unread = self.unread else {
            self.unread = bytes
            return
        }
        // Frames not taken before the next read (the handlers take all of them first): joined.
        // Taken out first, so that the buffer has one owner and the bytes are appended in place
        // (with two, each read copied everything before it: quadratic in a large frame's reads).
        self.unread = nil
        // The frames decoded from it go first once they are at least as long as what is left: a
        // buffer with decoded frames in front grew without end, every doubling copying it whole.
        if unread.readerIndex > 0 && unread.readerIndex >= unread.readableBytes {
            unread.discardReadBytes()
        }
        unread.writeBuffer(&bytes)
        self.unread = unread
    }

    /// The next whole frame, or nil until more comes. At the end of the input (`seenEOF`), bytes
    /// that are not a whole frame throw; so does a frame that breaks the protocol (and what is
    /// unread is then dropped).
    mutating func next(seenEOF: Bool) throws -> Frame<Message>? {
        if var gathered = self.gathered {
            self.gathered = nil
            if let frame = try self.complete(&gathered) { return frame }
            if seenEOF {
                return try self.decoder.decodeLast(buffer: &gathered, seenEOF: true)  // throws: cut short
            }
            self.gathered = gathered
            return nil
        }
        guard var bytes = self.unread else { return nil }
        self.unread = nil
        let frame = try seenEOF ? self.decoder.decodeLast(buffer: &bytes, seenEOF: true) : self.decoder.decode(buffer: &bytes)
        guard bytes.readableBytes > 0 else { return frame }
        if case .some = frame {  // not `frame != nil`, which copied the frame (a request's every reference)
            self.unread = bytes
        } else if bytes.readerIndex == 0 {
            self.gathered = bytes  // the read starts the frame: it is the frame's buffer already
        } else {
            // The start of a frame after decoded ones moves to a buffer of its own, and the
            // read's buffer is let go.
            var start = ByteBufferAllocator().buffer(capacity: Self.gatheringCapacity(for: bytes))
            start.writeBuffer(&bytes)
            self.gathered = start
        }
        return frame
    }

    /// Moves into `gathered` as many of the bytes its frame still needs as are unread (its header
    /// first, which is checked as soon as its 12 bytes are there), and decodes the frame if whole.
    private mutating func complete(_ gathered: inout ByteBuffer) throws -> Frame<Message>? {
        if gathered.readableBytes < FrameHeader.size {
            self.move(FrameHeader.size - gathered.readableBytes, into: &gathered)
        }
        if let frame = try self.decoder.decode(buffer: &gathered) { return frame }
        guard let header = FrameHeader.peek(in: gathered) else { return nil }
        self.move(FrameHeader.size + Int(header.payloadLength) - gathered.readableBytes, into: &gathered)
        return try self.decoder.decode(buffer: &gathered)
    }

    /// Moves up to `count` unread bytes to the end of `buffer`.
    private mutating func move(_ count: Int, into buffer: inout ByteBuffer) {
        guard var unread = self.unread else { return }
        self.unread = nil
        var bytes = unread.readSlice(length: min(count, unread.readableBytes))!
        buffer.writeBuffer(&bytes)
        if unread.readableBytes > 0 { self.unread = unread }
    }

    /// Room for the frame that `start` begins, up to twice the bytes there: a frame's bytes come
    /// in a read or two, and a peer that declares a large frame and stops gets no more room than
    /// it sent (its buffer grows, doubling, as the bytes come).
    private static func gatheringCapacity(for start: ByteBuffer) -> Int {
        guard let header = FrameHeader.peek(in: start) else { return FrameHeader.size }
        return min(FrameHeader.size + Int(header.payloadLength), 2 * start.readableBytes)
    }
}

extension FrameReader where Message == ClientRequest {
    /// `next(seenEOF:)` for the server's requests.
    package mutating func nextRequest(seenEOF: Bool) throws -> ClientFrame? {
        try self.next(seenEOF: seenEOF)
    }
}

extension FrameReader where Message == ServerMessage {
    /// `next(seenEOF:)` for the client's replies and deliveries.
    package mutating func nextReply(seenEOF: Bool) throws -> ServerFrame? {
        try self.next(seenEOF: seenEOF)
    }
}

extension AdaptiveRecvByteBufferAllocator {
    /// The reads of a connection carrying frames (the server's and FanoutClient's): up to 1 MiB at
    /// a time, where SwiftNIO's default stops at 64 KiB. A SUBSCRIBE of 1000 tokens is ~170 KB and
    /// a DELIVERIES frame some hundreds of KB: read in 64 KiB pieces, each was joined by copying.
    /// The allocator grows only after reads that fill the buffer, and shrinks again.
    package static let frames = AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 2048, maximum: 1 << 20)
}
