import FanoutCore
import FanoutTestSupport
import FanoutWire
import NIOCore
import Testing

/// Random bytes and mutated valid frames: the decoders never crash, and every outcome is a frame,
/// a wait for more bytes, or a `ProtocolError`.
@Suite("Wire fuzz")
struct FrameFuzzTests {
    @Test func randomBytesNeverCrashTheDecoders() {
        var random = SeededRandomNumberGenerator(seed: 42)
        var outcomes = Set<FrameFuzz.Outcome>()
        for _ in 0..<20_000 {
            var bytes = random.bytes(Int.random(in: 0...64, using: &random))
            if bytes.count >= 12, Bool.random(using: &random) {
                bytes[0] = 1  // past the version check more often
                bytes[2] = 0
                bytes[3] = 0
                bytes[8] = 0
                bytes[9] = 0
            }
            outcomes.insert(FrameFuzz.feed(bytes, as: ClientRequest.self))
            outcomes.insert(FrameFuzz.feed(bytes, as: ServerMessage.self))
        }
        #expect(outcomes.contains(.protocolError) && outcomes.contains(.incomplete))
        #expect(!outcomes.contains(.otherError), "every failure is a ProtocolError")
    }

    @Test func mutatedValidFramesNeverCrashTheDecoders() throws {
        var samples = WireSamples(seed: 43)
        var random = SeededRandomNumberGenerator(seed: 44)
        var outcomes: [FrameFuzz.Outcome: Int] = [:]
        for _ in 0..<10_000 {
            var request = ByteBuffer()
            try ClientFrame(requestID: samples.u32(), request: samples.request()).encode(into: &request)
            outcomes[FrameFuzz.feed(FrameFuzz.mutate(Array(request.readableBytesView), using: &random), as: ClientRequest.self), default: 0] += 1
            var reply = ByteBuffer()
            try ServerFrame(requestID: samples.u32(), message: samples.message()).encode(into: &reply)
            outcomes[FrameFuzz.feed(FrameFuzz.mutate(Array(reply.readableBytesView), using: &random), as: ServerMessage.self), default: 0] += 1
        }
        #expect(Set(outcomes.keys) == [.frames, .incomplete, .protocolError], "\(outcomes)")
    }
}
