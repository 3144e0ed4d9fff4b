import FanoutCore
import FanoutTestSupport
import FanoutWire
import NIOCore
import Testing

/// Random bytes and mutated valid frames: the decoders never crash, and every outcome is a frame,
/// a wait for more bytes, or a `ProtocolError`.
@Suite("Wire fuzz")
struct FrameFuzzTests {
    enum Outcome: Hashable { case frames, incomplete, protocolError }

    static func feed<Frame: WireFrame>(_ bytes: [UInt8], as: Frame.Type) -> Outcome {
        var decoder = FrameDecoder<Frame>(maximumPayloadSize: 4096)
        var buffer = ByteBuffer(bytes: bytes)
        do {
            var decoded = 0
            while try decoder.decode(buffer: &buffer) != nil { decoded += 1 }
            if buffer.readableBytes > 0 {
                _ = try decoder.decodeLast(buffer: &buffer, seenEOF: true)
                return .incomplete
            }
            return decoded > 0 ? .frames : .incomplete
        } catch is ProtocolError {
            return .protocolError
        } catch {
            Issue.record("a decoder threw something other than ProtocolError: \(error)")
            return .protocolError
        }
    }

    /// A valid frame with one of: a truncation, a wrong length, a flipped byte, an unknown opcode,
    /// an oversized length, or invalid UTF-8 spliced in.
    static func mutate(_ bytes: [UInt8], using random: inout SeededRandomNumberGenerator) -> [UInt8] {
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

    @Test func randomBytesNeverCrashTheDecoders() {
        var random = SeededRandomNumberGenerator(seed: 42)
        var outcomes = Set<Outcome>()
        for _ in 0..<20_000 {
            var bytes = random.bytes(Int.random(in: 0...64, using: &random))
            if bytes.count >= 12, Bool.random(using: &random) {
                bytes[0] = 1  // past the version check more often
                bytes[2] = 0
                bytes[3] = 0
                bytes[8] = 0
                bytes[9] = 0
            }
            outcomes.insert(Self.feed(bytes, as: ClientFrame.self))
            outcomes.insert(Self.feed(bytes, as: ServerFrame.self))
        }
        #expect(outcomes.contains(.protocolError) && outcomes.contains(.incomplete))
    }

    @Test func mutatedValidFramesNeverCrashTheDecoders() throws {
        var samples = WireSamples(seed: 43)
        var random = SeededRandomNumberGenerator(seed: 44)
        var outcomes: [Outcome: Int] = [:]
        for _ in 0..<10_000 {
            var request = ByteBuffer()
            try ClientFrame(requestID: samples.u32(), request: samples.request()).encode(into: &request)
            outcomes[Self.feed(Self.mutate(Array(request.readableBytesView), using: &random), as: ClientFrame.self), default: 0] += 1
            var reply = ByteBuffer()
            try ServerFrame(requestID: samples.u32(), message: samples.message()).encode(into: &reply)
            outcomes[Self.feed(Self.mutate(Array(reply.readableBytesView), using: &random), as: ServerFrame.self), default: 0] += 1
        }
        #expect(outcomes.count == 3, "\(outcomes)")
    }
}
