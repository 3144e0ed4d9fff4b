import FanoutModel
public import NIOCore

/// A request encoded once, to be sent later, as often as wanted, each time in a frame with a
/// request id of its own: what a client that prepares its requests ahead (an import, a load
/// test) holds, so that sending one costs a 12-byte header and no encoding.
public struct EncodedRequest: Sendable {
    public let opcode: Opcode
    /// The frame's payload, as `ClientRequest.encodePayload` writes it.
    public let payload: ByteBuffer

    /// Encodes `request`'s payload.
    /// - Throws: what encoding `request` throws (a field over its limit), or `RESOURCE_EXHAUSTED`
    ///   when the payload is over `maximumPayloadSize`.
    public init(_ request: ClientRequest, maximumPayloadSize: Int = FrameHeader.defaultMaximumPayloadSize) throws(ProtocolError) {
        var payload = ByteBuffer()
        try request.encodePayload(into: &payload)
        guard payload.readableBytes <= min(maximumPayloadSize, Int(UInt32.max)) else {
            throw .frameTooLarge(request.opcode, bytes: payload.readableBytes, maximum: maximumPayloadSize)
        }
        self.opcode = request.opcode
        self.payload = payload
    }

    /// The header of this request's frame with `requestID`; the payload follows it on the wire.
    public func header(requestID: UInt32) -> FrameHeader {
        FrameHeader(opcode: self.opcode, requestID: requestID, payloadLength: UInt32(self.payload.readableBytes))
    }
}
