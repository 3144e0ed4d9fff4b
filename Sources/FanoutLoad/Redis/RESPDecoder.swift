public import NIOCore

/// Decodes RESP2 values incrementally: complete elements of a large array are consumed as they
/// arrive (a reply of a million set members is parsed once, not once per read), and the partial
/// arrays wait on a stack. Lengths and nesting are bounded; anything malformed is an error.
public struct RESPDecoder: NIOSingleStepByteToMessageDecoder {
    public typealias InboundOut = RESPValue

    /// The longest bulk string accepted (Redis's own limit is 512 MB).
    public static let maximumBulkLength = 64 * 1024 * 1024
    /// The most elements one array may announce.
    public static let maximumArrayCount = 64 * 1024 * 1024
    /// The deepest nesting of arrays.
    public static let maximumDepth = 32
    /// The longest line of a simple string, error or integer.
    public static let maximumLineLength = 64 * 1024

    private var partial: [(remaining: Int, elements: [RESPValue])] = []

    public init() {}

    public mutating func decode(buffer: inout ByteBuffer) throws -> RESPValue? {
        while true {
            guard let element = try self.readElement(&buffer) else { return nil }
            switch element {
            case .value(var value):
                // Complete the arrays this value finishes.
                while !self.partial.isEmpty {
                    self.partial[self.partial.count - 1].elements.append(value)
                    self.partial[self.partial.count - 1].remaining -= 1
                    guard self.partial[self.partial.count - 1].remaining == 0 else { break }
                    value = .array(self.partial.removeLast().elements)
                }
                if self.partial.isEmpty { return value }
            case .arrayHeader(let count):
                guard self.partial.count < Self.maximumDepth else {
                    throw RESPError("arrays nested deeper than \(Self.maximumDepth)")
                }
                var elements: [RESPValue] = []
                elements.reserveCapacity(Swift.min(count, 4096))
                self.partial.append((count, elements))
            }
        }
    }

    public mutating func decodeLast(buffer: inout ByteBuffer, seenEOF: Bool) throws -> RESPValue? {
        try self.decode(buffer: &buffer)
    }

    private enum Element {
        case value(RESPValue)
        /// An array with at least one element still to come.
        case arrayHeader(Int)
    }

    /// One scalar or array header, consumed only when it is complete.
    private func readElement(_ buffer: inout ByteBuffer) throws -> Element? {
        guard let kind = buffer.getInteger(at: buffer.readerIndex, as: UInt8.self) else { return nil }
        let lineStart = buffer.readerIndex + 1
        guard let lineEnd = try Self.lineEnd(buffer, from: lineStart) else { return nil }
        let line = buffer.getString(at: lineStart, length: lineEnd - lineStart) ?? ""
        let afterLine = lineEnd + 2
        switch kind {
        case UInt8(ascii: "+"):
            buffer.moveReaderIndex(to: afterLine)
            return .value(.simpleString(line))
        case UInt8(ascii: "-"):
            buffer.moveReaderIndex(to: afterLine)
            return .value(.error(line))
        case UInt8(ascii: ":"):
            guard let value = Int64(line) else { throw RESPError("an integer reply that is not a number") }
            buffer.moveReaderIndex(to: afterLine)
            return .value(.integer(value))
        case UInt8(ascii: "$"):
            guard let length = Int(line), length >= -1, length <= Self.maximumBulkLength else {
                throw RESPError("a bulk string length out of range")
            }
            if length == -1 {
                buffer.moveReaderIndex(to: afterLine)
                return .value(.bulkString(nil))
            }
            guard buffer.writerIndex - afterLine >= length + 2 else { return nil }
            guard buffer.getInteger(at: afterLine + length, as: UInt16.self) == 0x0D0A else {
                throw RESPError("a bulk string not followed by CRLF")
            }
            let bytes = buffer.getBytes(at: afterLine, length: length) ?? []
            buffer.moveReaderIndex(to: afterLine + length + 2)
            return .value(.bulkString(bytes))
        case UInt8(ascii: "*"):
            guard let count = Int(line), count >= -1, count <= Self.maximumArrayCount else {
                throw RESPError("an array length out of range")
            }
            buffer.moveReaderIndex(to: afterLine)
            switch count {
            case -1: return .value(.array(nil))
            case 0: return .value(.array([]))
            default: return .arrayHeader(count)
            }
        default:
            throw RESPError("an unknown type byte \(kind)")
        }
    }

    /// The index of the CR of the CRLF ending the line that starts at `start`, or nil when the
    /// line is not complete yet.
    private static func lineEnd(_ buffer: ByteBuffer, from start: Int) throws -> Int? {
        // The view's indices are the buffer's own.
        let line = buffer.readableBytesView.dropFirst(start - buffer.readerIndex).prefix(Self.maximumLineLength + 1)
        guard let cr = line.firstIndex(of: UInt8(ascii: "\r")) else {
            if line.count > Self.maximumLineLength { throw RESPError("a line longer than \(Self.maximumLineLength) bytes") }
            return nil
        }
        guard let lf = buffer.getInteger(at: cr + 1, as: UInt8.self), cr + 1 < buffer.writerIndex else { return nil }
        guard lf == UInt8(ascii: "\n") else { throw RESPError("a CR not followed by LF") }
        return cr
    }
}

/// Malformed RESP from the peer.
public struct RESPError: Error, CustomStringConvertible, Hashable, Sendable {
    public var description: String

    public init(_ description: String) {
        self.description = description
    }
}
