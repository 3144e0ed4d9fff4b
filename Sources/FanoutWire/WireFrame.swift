internal import FanoutModel
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
    public func encode(into buffer: inout ByteBuffer, maximumPayloadSize: Int = FrameHeader.defaultMaximumPayloadSize) throws(ProtocolError) {
        let start = buffer.writerIndex
        buffer.writeMultipleIntegers(FrameHeader.currentVersion, self.opcode.rawValue, UInt16(0), self.requestID, UInt32(0))
        do {
            try self.message.encodePayload(into: &buffer)
        } catch {
            buffer.moveWriterIndex(to: start)
            throw error
        }
        let length = buffer.writerIndex - start - FrameHeader.size
        guard length <= maximumPayloadSize else {
            buffer.moveWriterIndex(to: start)
            throw ProtocolError(.resourceExhausted, "a \(self.opcode) frame of \(length) bytes is over the maximum frame size \(maximumPayloadSize)", requestID: self.requestID)
        }
        buffer.setInteger(UInt32(length), at: start + 8)
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
