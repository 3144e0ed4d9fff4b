package import NIOCore

/// The 12-byte header in front of every frame (docs/wire-protocol.md section 2), big-endian:
///
/// ```
/// | u8 version | u8 opcode | u16 flags | u32 request id | u32 payload length | payload ...
/// ```
public struct FrameHeader: Hashable, Sendable {
    /// The protocol version this module speaks.
    public static let currentVersion: UInt8 = 2
    /// Bytes in a header.
    public static let size = 12
    /// The default maximum payload size a server announces (2 MiB).
    public static let defaultMaximumPayloadSize = 2 * 1024 * 1024

    public var version: UInt8
    public var opcode: Opcode
    public var flags: UInt16
    public var requestID: UInt32
    public var payloadLength: UInt32

    public init(version: UInt8 = FrameHeader.currentVersion, opcode: Opcode, flags: UInt16 = 0, requestID: UInt32, payloadLength: UInt32) {
        self.version = version
        self.opcode = opcode
        self.flags = flags
        self.requestID = requestID
        self.payloadLength = payloadLength
    }

    /// Reads a header without moving the reader index, if 12 bytes are there.
    package static func peek(in buffer: ByteBuffer) -> FrameHeader? {
        guard let (version, opcode, flags, requestID, length) = buffer.getMultipleIntegers(
            at: buffer.readerIndex,
            as: (UInt8, UInt8, UInt16, UInt32, UInt32).self
        ) else { return nil }
        return FrameHeader(version: version, opcode: Opcode(rawValue: opcode), flags: flags, requestID: requestID, payloadLength: length)
    }
}

extension ByteBuffer {
    /// Appends `header` as the wire carries it.
    package mutating func writeFrameHeader(_ header: FrameHeader) {
        self.writeMultipleIntegers(header.version, header.opcode.rawValue, header.flags, header.requestID, header.payloadLength)
    }
}
