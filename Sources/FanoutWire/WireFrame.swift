internal import FanoutCore
public import NIOCore

/// A frame of either direction: a header's opcode and request id, and a payload.
public protocol WireFrame: Sendable {
    var requestID: UInt32 { get }
    var opcode: Opcode { get }
    /// Writes the payload (the header is the encoder's).
    func encodePayload(into buffer: inout ByteBuffer) throws(ProtocolError)
    /// Decodes a payload that has been read whole; every byte must be used.
    static func decode(header: FrameHeader, payload: ByteBuffer) throws(ProtocolError) -> Self
}

extension WireFrame {
    /// Appends the whole frame (header and payload) to `buffer`.
    /// - Throws: `RESOURCE_EXHAUSTED` when the payload is over `maximumPayloadSize` (nothing is
    ///   left in `buffer`), or `INVALID_ARGUMENT` for a field that cannot be encoded.
    public func encode(into buffer: inout ByteBuffer, maximumPayloadSize: Int = FrameHeader.defaultMaximumPayloadSize) throws(ProtocolError) {
        let start = buffer.writerIndex
        buffer.writeMultipleIntegers(FrameHeader.currentVersion, self.opcode.rawValue, UInt16(0), self.requestID, UInt32(0))
        do {
            try self.encodePayload(into: &buffer)
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
}
