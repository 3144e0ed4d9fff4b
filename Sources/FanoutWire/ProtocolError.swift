public import FanoutModel

/// A frame that breaks the protocol: the peer gets an ERROR frame with `code` and the connection
/// is closed (docs/wire-protocol.md section 7). `requestID` is the offending frame's, or 0.
public struct ProtocolError: Error, Hashable, Sendable, CustomStringConvertible {
    public var code: FanoutError.Code
    public var message: String
    public var requestID: UInt32

    public init(_ code: FanoutError.Code = .invalidArgument, _ message: String, requestID: UInt32 = 0) {
        self.code = code
        self.message = message
        self.requestID = requestID
    }

    /// The error as the ERROR frame carries it.
    public var fanoutError: FanoutError {
        FanoutError(self.code, self.message)
    }

    public var description: String { "\(self.code): \(self.message)" }

    /// `RESOURCE_EXHAUSTED` for a frame (of `opcode`, when known) whose payload of `bytes` is over
    /// the maximum frame size, which every side checks in its own place.
    package static func frameTooLarge(_ opcode: Opcode?, bytes: Int, maximum: Int, requestID: UInt32 = 0) -> ProtocolError {
        let frame = opcode.map { "a \($0) frame" } ?? "a frame"
        return ProtocolError(.resourceExhausted, "\(frame) of \(bytes) bytes is over the maximum frame size \(maximum)", requestID: requestID)
    }
}
