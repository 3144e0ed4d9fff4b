internal import FanoutWire
internal import NIOCore

/// The requests in a connection's bytes: what the socket brought and is not decoded yet, and the
/// whole frames in it, in order. A header is checked (version, flags, size) as soon as its 12
/// bytes are there, before its payload is waited for (`FrameDecoder`).
///
/// The connection's handler decodes with it instead of a `ByteToMessageHandler` in front, whose
/// generic decode loop ran unspecialized and boxed every frame in an `NIOAny`.
struct RequestReader {
    private var decoder: FrameDecoder<ClientRequest>
    /// Bytes not decoded yet: the start of a frame not whole yet (or frames not taken yet).
    private var unread: ByteBuffer?

    init(maximumPayloadSize: Int) {
        self.decoder = FrameDecoder(maximumPayloadSize: maximumPayloadSize)
    }

    /// Some bytes have not been decoded: at the end of the input, a frame cut short.
    var hasUnread: Bool { self.unread != nil }

    /// Adds what the socket brought after what is unread.
    mutating func append(_ bytes: inout ByteBuffer) {
        guard var unread = self.unread else {
            self.unread = bytes
            return
        }
        // Taken out first, so that the buffer has one owner and the bytes are appended in place
        // (with two, each read copied everything before it: quadratic in a large frame's reads).
        self.unread = nil
        unread.writeBuffer(&bytes)
        self.unread = unread
    }

    /// The next whole frame, or nil until more comes. At the end of the input (`seenEOF`), bytes
    /// that are not a whole frame throw; so does a frame that breaks the protocol (and what is
    /// unread is then dropped).
    mutating func next(seenEOF: Bool) throws -> ClientFrame? {
        guard var bytes = self.unread else { return nil }
        self.unread = nil
        let frame = try seenEOF ? self.decoder.decodeLastRequest(buffer: &bytes) : self.decoder.decodeRequest(buffer: &bytes)
        if bytes.readableBytes > 0 {
            self.unread = bytes
        }
        return frame
    }
}
