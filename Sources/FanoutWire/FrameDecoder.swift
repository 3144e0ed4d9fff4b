internal import FanoutModel
public import NIOCore

/// Splits bytes into frames and decodes them (docs/wire-protocol.md section 2): peeks the 12-byte
/// header, refuses a bad version, non-zero flags or a payload over `maximumPayloadSize` before
/// buffering the payload, waits for the whole payload, then decodes it, insisting that every byte
/// is used. Errors are `ProtocolError`s carrying the frame's request id.
public struct FrameDecoder<Message: WireMessage>: NIOSingleStepByteToMessageDecoder {
    public typealias InboundOut = Frame<Message>

    public var maximumPayloadSize: Int

    public init(maximumPayloadSize: Int = FrameHeader.defaultMaximumPayloadSize) {
        self.maximumPayloadSize = maximumPayloadSize
    }

    public mutating func decode(buffer: inout ByteBuffer) throws -> Frame<Message>? {
        guard let header = FrameHeader.peek(in: buffer) else { return nil }
        guard header.version == FrameHeader.currentVersion else {
            throw ProtocolError(.invalidArgument, "protocol version \(header.version) is not supported (version \(FrameHeader.currentVersion) is)", requestID: header.requestID)
        }
        guard header.flags == 0 else {
            throw ProtocolError(.invalidArgument, "flags must be 0 (got \(header.flags))", requestID: header.requestID)
        }
        guard header.payloadLength <= self.maximumPayloadSize else {
            throw ProtocolError.frameTooLarge(nil, bytes: Int(header.payloadLength), maximum: self.maximumPayloadSize, requestID: header.requestID)
        }
        let length = Int(header.payloadLength)
        guard buffer.readableBytes >= FrameHeader.size + length else { return nil }
        buffer.moveReaderIndex(forwardBy: FrameHeader.size)
        guard let payload = buffer.readSlice(length: length) else { return nil }
        return try Frame<Message>.decode(header: header, payload: payload)
    }

    public mutating func decodeLast(buffer: inout ByteBuffer, seenEOF: Bool) throws -> Frame<Message>? {
        if let frame = try self.decode(buffer: &buffer) {
            return frame
        }
        if seenEOF, buffer.readableBytes > 0 {
            let requestID = FrameHeader.peek(in: buffer)?.requestID ?? 0
            throw ProtocolError(.invalidArgument, "the connection ended inside a frame (\(buffer.readableBytes) bytes)", requestID: requestID)
        }
        return nil
    }
}

/// Writes frames for a channel (a `MessageToByteHandler`), refusing payloads over the maximum.
public struct FrameEncoder<Message: WireMessage>: MessageToByteEncoder {
    public typealias OutboundIn = Frame<Message>

    public var maximumPayloadSize: Int

    public init(maximumPayloadSize: Int = FrameHeader.defaultMaximumPayloadSize) {
        self.maximumPayloadSize = maximumPayloadSize
    }

    public func encode(data: Frame<Message>, out: inout ByteBuffer) throws {
        try data.encode(into: &out, maximumPayloadSize: self.maximumPayloadSize)
    }
}
