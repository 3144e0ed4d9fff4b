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
        var (stream, sent) = try Self.frames(150, tokens: 50...300, seed: seed, using: &random)
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

    /// Frames read in pieces of every size, from a byte (a header in pieces) to several frames at
    /// once: each comes out whole and in order, whether it came in one read or was gathered from
    /// several, and nothing is left over.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func framesSplitAnywhereComeOutWhole(seed: UInt64) throws {
        var random = SeededRandomNumberGenerator(seed: seed)
        var (stream, sent) = try Self.frames(300, tokens: 0...40, seed: seed, using: &random)
        let limits = [1, 13, 200, 5000, 40_000]
        var reader = FrameReader<ClientRequest>(maximumPayloadSize: 1 << 20)
        var received: [ClientFrame] = []
        while stream.readableBytes > 0 {
            let limit = limits[Int.random(in: 0..<limits.count, using: &random)]
            // A fresh buffer per read, as a socket's reads are.
            var piece = ByteBuffer(bytes: stream.readBytes(length: min(stream.readableBytes, Int.random(in: 1...limit, using: &random)))!)
            reader.append(&piece)
            while let frame = try reader.nextRequest(seenEOF: false) { received.append(frame) }
        }
        #expect(received == sent)
        #expect(!reader.hasUnread)
        #expect(reader.bufferCapacity == 0)
    }

    /// A frame gathered from several reads is checked as its first one is: a bad header throws as
    /// soon as its 12 bytes are there, before its payload comes; and a frame cut short by the end
    /// of the input throws.
    @Test func aGatheredFrameIsCheckedAsAnyOther() throws {
        var good = ByteBuffer()
        try ClientFrame(requestID: 1, request: .ping).encode(into: &good)
        let ping = Array(good.readableBytesView)

        // A whole PING, then a header of version 9 in two pieces, its payload never sent.
        var reader = FrameReader<ClientRequest>(maximumPayloadSize: 1 << 20)
        let badHeader: [UInt8] = [9, 0x01, 0, 0, 0, 0, 0, 2, 0, 0, 0, 100]
        var first = ByteBuffer(bytes: ping + badHeader.prefix(5))
        reader.append(&first)
        #expect(try reader.nextRequest(seenEOF: false)?.requestID == 1)
        #expect(try reader.nextRequest(seenEOF: false) == nil)
        var second = ByteBuffer(bytes: badHeader.dropFirst(5))
        reader.append(&second)
        #expect(throws: ProtocolError.self) { try reader.nextRequest(seenEOF: false) }

        // A PING, then half of another; then the input ends.
        var cut = FrameReader<ClientRequest>(maximumPayloadSize: 1 << 20)
        var bytes = ByteBuffer(bytes: ping + ping.prefix(7))
        cut.append(&bytes)
        #expect(try cut.nextRequest(seenEOF: false)?.requestID == 1)
        #expect(try cut.nextRequest(seenEOF: false) == nil)
        #expect(cut.hasUnread)
        let error = #expect(throws: ProtocolError.self) { try cut.nextRequest(seenEOF: true) }
        #expect(error?.description.contains("the connection ended inside a frame (7 bytes)") == true)
    }

    /// A peer that declares a large frame after a whole one, and sends little of it, gets room for
    /// about what it sent, not for what it declared.
    @Test func aDeclaredFrameGetsRoomForWhatCame() throws {
        var ping = ByteBuffer()
        try ClientFrame(requestID: 1, request: .ping).encode(into: &ping)
        // REGISTER (0x20) declaring a payload of 900 KB, of which 100 bytes follow.
        let header: [UInt8] = [FrameHeader.currentVersion, 0x20, 0, 0, 0, 0, 0, 2, 0x00, 0x0D, 0xBB, 0xA0]
        var bytes = ByteBuffer(bytes: Array(ping.readableBytesView) + header + [UInt8](repeating: 0, count: 100))
        var reader = FrameReader<ClientRequest>(maximumPayloadSize: 1 << 20)
        reader.append(&bytes)
        #expect(try reader.nextRequest(seenEOF: false)?.requestID == 1)
        #expect(try reader.nextRequest(seenEOF: false) == nil)
        #expect(reader.hasUnread)
        #expect(reader.bufferCapacity <= 1024, "\(reader.bufferCapacity) bytes held for 112 received")
    }

    /// `count` requests back to back, each a SUBSCRIBE of a random number of tokens in `tokens`
    /// (a PING where that is none), and the frames as sent.
    private static func frames(
        _ count: Int,
        tokens: ClosedRange<Int>,
        seed: UInt64,
        using random: inout SeededRandomNumberGenerator
    ) throws -> (stream: ByteBuffer, sent: [ClientFrame]) {
        var samples = WireSamples(seed: seed)
        var stream = ByteBuffer()
        var sent: [ClientFrame] = []
        for index in 0..<count {
            let registrations = (0..<Int.random(in: tokens, using: &random)).map { _ in samples.string(maximum: 163) }
            let frame =
                registrations.isEmpty
                ? ClientFrame(requestID: UInt32(index), request: .ping)
                : ClientFrame(requestID: UInt32(index), request: .subscribe(project: "default", topic: "news", registrations: RegistrationList(registrations)))
            try frame.encode(into: &stream)
            sent.append(frame)
        }
        return (stream, sent)
    }
}
