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
    /// Bytes not decoded yet: the start of a frame not whole yet (or frames not taken yet).
    private var unread: ByteBuffer?

    package init(maximumPayloadSize: Int) {
        self.decoder = FrameDecoder(maximumPayloadSize: maximumPayloadSize)
    }

    /// Some bytes have not been decoded: at the end of the input, a frame cut short.
    package var hasUnread: Bool { self.unread != nil }

    /// The bytes the reader's buffer holds room for (0 with nothing unread): what a connection's
    /// input costs in memory.
    package var bufferCapacity: Int { self.unread?.capacity ?? 0 }

    /// Adds what the socket brought after what is unread.
    package mutating func append(_ bytes: inout ByteBuffer) {
        guard var unread = self.unread else {
            self.unread = bytes
            return
        }
        // Taken out first, so that the buffer has one owner and the bytes are appended in place
        // (with two, each read copied everything before it: quadratic in a large frame's reads).
        self.unread = nil
        // The frames decoded from it go first once they are at least as long as what is left: a
        // connection whose requests come back to back always has part of one unread, and its
        // buffer grew without end, every doubling copying it whole onto pages never touched.
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
        guard var bytes = self.unread else { return nil }
        self.unread = nil
        let frame = try seenEOF ? self.decoder.decodeLast(buffer: &bytes, seenEOF: true) : self.decoder.decode(buffer: &bytes)
        if bytes.readableBytes > 0 {
            self.unread = bytes
        }
        return frame
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
