package import FanoutModel
public import NIOCore

/// The messages of one direction (`ClientRequest`, `ServerMessage`): each knows its opcode and
/// the codec of its payload.
public protocol WireMessage: Hashable, Sendable {
    var opcode: Opcode { get }
    /// Writes the payload (the header is the frame's).
    func encodePayload(into buffer: inout ByteBuffer) throws(ProtocolError)
    /// Decodes a payload that has been read whole; every byte must be used.
    static func decode(opcode: Opcode, payload: ByteBuffer, requestID: UInt32) throws(ProtocolError) -> Self
}

/// A frame: a message and its request id. For requests the id is the client's; a reply echoes
/// it; DELIVERY carries the ATTACH's; GOAWAY, 0.
public struct Frame<Message: WireMessage>: Hashable, Sendable {
    public var requestID: UInt32
    public var message: Message

    public init(requestID: UInt32, message: Message) {
        self.requestID = requestID
        self.message = message
    }

    public var opcode: Opcode { self.message.opcode }

    /// Appends the whole frame (header and payload) to `buffer`.
    /// - Throws: `RESOURCE_EXHAUSTED` when the payload is over `maximumPayloadSize` (nothing is
    ///   left in `buffer`), or `INVALID_ARGUMENT` for a field that cannot be encoded.
    ///
    /// Inlinable, so that the server's replies and the client's requests are encoded by code
    /// specialized for their message type (the generic body looked up `Frame`'s metadata at run
    /// time for every reply).
    @inlinable
    public func encode(into buffer: inout ByteBuffer, maximumPayloadSize: Int = FrameHeader.defaultMaximumPayloadSize) throws(ProtocolError) {
        try Self.encode(requestID: self.requestID, self.message, into: &buffer, maximumPayloadSize: maximumPayloadSize)
    }

    /// `encode(into:maximumPayloadSize:)` of the frame of `message` and `requestID`, the message
    /// borrowed: the server encodes its replies where they lie, without a frame holding a copy.
    @inlinable
    public static func encode(
        requestID: UInt32,
        _ message: Message,
        into buffer: inout ByteBuffer,
        maximumPayloadSize: Int = FrameHeader.defaultMaximumPayloadSize
    ) throws(ProtocolError) {
        try buffer.writeFrame(opcode: message.opcode, requestID: requestID, maximumPayloadSize: maximumPayloadSize) { (buffer: inout ByteBuffer) throws(ProtocolError) in
            try message.encodePayload(into: &buffer)
        }
    }

    /// The frame of a header and its whole payload.
    public static func decode(header: FrameHeader, payload: ByteBuffer) throws(ProtocolError) -> Frame {
        Frame(requestID: header.requestID, message: try Message.decode(opcode: header.opcode, payload: payload, requestID: header.requestID))
    }
}

/// A frame from client to server.
public typealias ClientFrame = Frame<ClientRequest>
/// A frame from server to client.
public typealias ServerFrame = Frame<ServerMessage>

extension Frame where Message == ClientRequest {
    public init(requestID: UInt32, request: ClientRequest) {
        self.init(requestID: requestID, message: request)
    }

    public var request: ClientRequest { self.message }
}

extension ByteBuffer {
    /// Appends a frame: the header, the payload `body` writes, and its length.
    /// - Throws: what `body` throws, or `RESOURCE_EXHAUSTED` when the payload is over
    ///   `maximumPayloadSize`; either way nothing of the frame is left in the buffer.
    @usableFromInline
    package mutating func writeFrame(
        opcode: Opcode,
        requestID: UInt32,
        maximumPayloadSize: Int,
        _ body: (inout ByteBuffer) throws(ProtocolError) -> Void
    ) throws(ProtocolError) {
        let start = self.writerIndex
        self.writeFrameHeader(FrameHeader(opcode: opcode, requestID: requestID, payloadLength: 0))
        do {
            try body(&self)
        } catch {
            self.moveWriterIndex(to: start)
            throw error
        }
        let length = self.writerIndex - start - FrameHeader.size
        guard length <= maximumPayloadSize else {
            self.moveWriterIndex(to: start)
            throw .frameTooLarge(opcode, bytes: length, maximum: maximumPayloadSize, requestID: requestID)
        }
        self.setInteger(UInt32(length), at: start + 8)
    }

    /// Appends a DELIVERY frame from a delivery's fields, without building a `WireDelivery` or a
    /// `ServerMessage` (the server's hot path): its size first, then the whole frame in one write
    /// (each small `ByteBuffer` write costs a uniqueness and an exclusivity check, which profiles
    /// showed at about 15% of the server's CPU while it hands out deliveries). The bytes are those
    /// of `ServerFrame(requestID: attachID, message: .delivery(...))`.
    package mutating func writeDeliveryFrame(
        attachID: UInt32,
        _ delivery: some DeliveryFrameFields,
        maximumPayloadSize: Int
    ) throws(ProtocolError) {
        let token = delivery.recipientToken
        let apnsToken = delivery.apnsToken?.hex
        let headers = delivery.headers
        let payload = delivery.payload
        // id, FID, token, APNs token, platform, expiry, two bools, headers, payload.
        let length = try 12 + RawWriter.fidSize(delivery.fid) + RawWriter.optionalTokenSize(token)
            + RawWriter.optionalStringSize(apnsToken, "apnsToken") + 1 + 8 + 2 + RawWriter.headersSize(headers) + 4 + payload.count
        guard length <= maximumPayloadSize else {
            throw .frameTooLarge(.delivery, bytes: length, maximum: maximumPayloadSize, requestID: attachID)
        }
        self.writeSizedFrame(opcode: .delivery, requestID: attachID, payloadLength: length) { out in
            out.integer(delivery.id.messageSequence)
            out.integer(delivery.id.slot)
            out.fid(delivery.fid)
            out.optionalToken(token)
            out.optionalString(apnsToken)
            out.integer(delivery.platform.code)
            out.integer(delivery.expiry.millisecondsSinceEpoch)
            out.bool(false)  // in flight: never, for a DELIVERY
            out.bool(delivery.isDeletedMessagesMarker)
            out.headers(headers)
            out.lengthPrefixed(payload)
        }
    }
}
