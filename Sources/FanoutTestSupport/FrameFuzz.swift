public import FanoutWire
internal import NIOCore

/// Feeding bytes to the frame decoders, and mutating valid frames (fuzz tests).
public enum FrameFuzz {
    public enum Outcome: Hashable { case frames, incomplete, protocolError, otherError }

    public static func feed<Message: WireMessage>(_ bytes: [UInt8], as: Message.Type, maximumPayloadSize: Int = 4096) -> Outcome {
        var decoder = FrameDecoder<Message>(maximumPayloadSize: maximumPayloadSize)
        var buffer = ByteBuffer(bytes: bytes)
        var decoded = 0
        do {
            while try decoder.decode(buffer: &buffer) != nil { decoded += 1 }
        } catch is ProtocolError {
            return .protocolError
        } catch {
            return .otherError
        }
        guard buffer.readableBytes == 0 else {
            // Short: at the end of the stream this is "the connection ended inside a frame".
            do {
                _ = try decoder.decodeLast(buffer: &buffer, seenEOF: true)
            } catch is ProtocolError {
            } catch {
                return .otherError
            }
            return .incomplete
        }
        return decoded > 0 ? .frames : .incomplete
    }

    /// A valid frame with one of: a truncation, a wrong length, a flipped byte, an unknown opcode,
    /// an oversized length, or invalid UTF-8 spliced in.
    public static func mutate(_ bytes: [UInt8], using random: inout SeededRandomNumberGenerator) -> [UInt8] {
        var bytes = bytes
        switch Int.random(in: 0...5, using: &random) {
        case 0:
            bytes = Array(bytes.prefix(Int.random(in: 0...bytes.count, using: &random)))
        case 1:
            let length = UInt32.random(in: 0...6000, using: &random)
            bytes.replaceSubrange(8..<12, with: withUnsafeBytes(of: length.bigEndian, Array.init))
        case 2:
            let index = Int.random(in: 0..<bytes.count, using: &random)
            bytes[index] ^= UInt8.random(in: 1...255, using: &random)
        case 3:
            bytes[1] = [0x00, 0x03, 0x7F, 0x13, 0x45, 0x80, 0xEE][Int.random(in: 0...6, using: &random)]
        case 4:
            bytes.replaceSubrange(8..<12, with: [0xFF, 0xFF, 0xFF, 0xF0])
        default:
            if bytes.count > 14 {
                let index = Int.random(in: 12..<bytes.count, using: &random)
                bytes[index] = [0xC3, 0xFF, 0x80, 0xED][Int.random(in: 0...3, using: &random)]
            }
        }
        return bytes
    }
}
