import FanoutModel
import FanoutTestSupport
@testable import FanoutWire
import NIOCore
import Testing

/// The frames in a connection's bytes as they arrive in reads.
@Suite("Frame reader")
struct FrameReaderTests {
    /// Requests back to back, read in pieces that always end inside a frame (as a client that
    /// pipelines large SUBSCRIBEs sends them): every frame comes out, in order, and the reader's
    /// buffer stays a few frames large (it grew without end when decoded frames stayed in front).
    @Test(arguments: [5, 6] as [UInt64])
    func pipelinedFramesKeepTheBufferBounded(seed: UInt64) throws {
        var random = SeededRandomNumberGenerator(seed: seed)
        var samples = WireSamples(seed: seed)
        var stream = ByteBuffer()
        var sent: [ClientFrame] = []
        for index in 0..<150 {
            let tokens = (0..<Int.random(in: 50...300, using: &random)).map { _ in samples.string(maximum: 163) }
            let frame = ClientFrame(requestID: UInt32(index), request: .subscribe(project: "default", topic: "news", registrations: RegistrationList(tokens)))
            try frame.encode(into: &stream)
            sent.append(frame)
        }
        let largest = sent.map { (try? WireCodecTests.encode($0).readableBytes) ?? 0 }.max() ?? 0
        var reader = FrameReader<ClientRequest>(maximumPayloadSize: 1 << 20)
        var received: [ClientFrame] = []
        var largestCapacity = 0
        while stream.readableBytes > 0 {
            var piece = stream.readSlice(length: min(stream.readableBytes, Int.random(in: 1000...70_000, using: &random)))!
            reader.append(&piece)
            while let frame = try reader.nextRequest(seenEOF: false) { received.append(frame) }
            largestCapacity = max(largestCapacity, reader.bufferCapacity)
        }
        #expect(received == sent)
        #expect(!reader.hasUnread)
        #expect(largestCapacity <= 4 * (largest + 70_000), "the buffer held \(largestCapacity) bytes for frames of at most \(largest)")
    }
}
