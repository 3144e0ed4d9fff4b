public import NIOCore

/// A value of RESP2, the Redis serialization protocol: what Redis replies, and (as an array of
/// bulk strings) what a client sends.
public enum RESPValue: Hashable, Sendable {
    case simpleString(String)
    case error(String)
    case integer(Int64)
    /// `nil` is the null bulk string (`$-1`).
    case bulkString([UInt8]?)
    /// `nil` is the null array (`*-1`).
    case array([RESPValue]?)

    /// Commands (each an array of bulk strings) in RESP2, in one buffer.
    public static func encodedCommands(_ commands: [[String]], allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        let size = commands.reduce(0) { total, arguments in total + 16 + arguments.reduce(0) { $0 + $1.utf8.count + 16 } }
        var buffer = allocator.buffer(capacity: size)
        for arguments in commands {
            Self.writeCommand(arguments, into: &buffer)
        }
        return buffer
    }

    /// Writes a command (an array of bulk strings) in RESP2, without building the value.
    public static func writeCommand(_ arguments: [String], into buffer: inout ByteBuffer) {
        buffer.writeStaticString("*")
        buffer.writeString(String(arguments.count))
        buffer.writeStaticString("\r\n")
        for argument in arguments {
            buffer.writeStaticString("$")
            buffer.writeString(String(argument.utf8.count))
            buffer.writeStaticString("\r\n")
            buffer.writeString(argument)
            buffer.writeStaticString("\r\n")
        }
    }

    /// The reply as a count: an integer, or the length of an array (a set's members).
    public var count: Int? {
        switch self {
        case .integer(let value): Int(exactly: value)
        case .array(let elements?): elements.count
        default: nil
        }
    }

    /// Writes the value in RESP2.
    public func write(into buffer: inout ByteBuffer) {
        switch self {
        case .simpleString(let text):
            buffer.writeStaticString("+")
            buffer.writeString(text)
            buffer.writeStaticString("\r\n")
        case .error(let text):
            buffer.writeStaticString("-")
            buffer.writeString(text)
            buffer.writeStaticString("\r\n")
        case .integer(let value):
            buffer.writeStaticString(":")
            buffer.writeString(String(value))
            buffer.writeStaticString("\r\n")
        case .bulkString(nil):
            buffer.writeStaticString("$-1\r\n")
        case .bulkString(let bytes?):
            buffer.writeStaticString("$")
            buffer.writeString(String(bytes.count))
            buffer.writeStaticString("\r\n")
            buffer.writeBytes(bytes)
            buffer.writeStaticString("\r\n")
        case .array(nil):
            buffer.writeStaticString("*-1\r\n")
        case .array(let elements?):
            buffer.writeStaticString("*")
            buffer.writeString(String(elements.count))
            buffer.writeStaticString("\r\n")
            for element in elements {
                element.write(into: &buffer)
            }
        }
    }
}
