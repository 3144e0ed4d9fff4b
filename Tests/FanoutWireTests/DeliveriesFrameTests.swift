import FanoutModel
import FanoutTestSupport
import FanoutWire
import NIOCore
import Testing

/// DELIVERIES frames (ATTACH_GROUPED's stream): the server's writer groups a poll's deliveries by
/// envelope, splits at the frame limit, and writes the bytes the message encoder writes.
@Suite("DELIVERIES frames")
struct DeliveriesFrameTests {
    /// A poll as the engine hands it out: deliveries of a few messages, interleaved (an
    /// installation's mailbox holds several), with tokens as long as FCM's; `messages` envelopes.
    static func poll(_ samples: inout WireSamples, messages: Int, recipients: Int) -> [WireDelivery] {
        let envelopes = (0..<messages).map { index in
            var envelope = samples.delivery()
            // Pairs share a sequence: one message rendered for two platforms (a device consumer's).
            envelope.id.messageSequence = UInt64(index / 2) + 1
            envelope.isInFlight = false
            return envelope
        }
        return (0..<recipients).map { index in
            var delivery = envelopes[samples.int(0...(messages - 1))]
            delivery.id.slot = UInt32(index)
            delivery.fid = samples.fid()
            delivery.token = RegistrationToken(String(repeating: "t", count: 150) + "\(index)")
            delivery.apnsToken = delivery.platform == .ios && samples.bool() ? APNsDeviceToken(String(repeating: "ab", count: 32)) : nil
            return delivery
        }
    }

    /// What a frame's writer should carry: the deliveries grouped by envelope, the groups in the
    /// order of their first delivery, each group's deliveries in their own order.
    static func grouped(_ deliveries: [WireDelivery]) -> [WireDelivery] {
        var keys: [[UInt64]] = []
        var groups: [[WireDelivery]] = []
        for delivery in deliveries {
            let key = [delivery.id.messageSequence, UInt64(delivery.platform.code), UInt64(bitPattern: delivery.expiry.millisecondsSinceEpoch), delivery.isDeletedMessagesMarker ? 1 : 0]
            if let index = keys.firstIndex(of: key) {
                groups[index].append(delivery)
            } else {
                keys.append(key)
                groups.append([delivery])
            }
        }
        return groups.flatMap { $0 }
    }

    static func frames(_ bytes: ByteBuffer, limit: Int = FrameHeader.defaultMaximumPayloadSize) throws -> [ServerFrame] {
        var decoder = FrameDecoder<ServerMessage>(maximumPayloadSize: limit)
        var buffer = bytes
        var frames: [ServerFrame] = []
        while let frame = try decoder.decode(buffer: &buffer) { frames.append(frame) }
        #expect(buffer.readableBytes == 0)
        return frames
    }

    @Test(arguments: [1, 2, 3, 16, 17, 20, 60] as [Int])
    func theWritersFrameIsTheMessagesFrameOfTheGroupedDeliveries(messages: Int) throws {
        var samples = WireSamples(seed: UInt64(messages))
        for _ in 0..<20 {
            let deliveries = Self.poll(&samples, messages: messages, recipients: samples.int(1...256))
            var direct = ByteBuffer()
            direct.writeDeliveriesFrames(attachID: 7, deliveries, maximumPayloadSize: FrameHeader.defaultMaximumPayloadSize)
            var expected = ByteBuffer()
            try ServerFrame(requestID: 7, message: .deliveries(Self.grouped(deliveries))).encode(into: &expected)
            #expect(direct == expected)
            // One envelope per message: the frame is smaller than a DELIVERY frame each.
            var single = ByteBuffer()
            for delivery in deliveries { try ServerFrame(requestID: 7, message: .delivery(delivery)).encode(into: &single) }
            #expect(messages >= deliveries.count || direct.readableBytes < single.readableBytes)
        }
    }

    /// The server writes a poll's deliveries as the slices of the engine's hand-outs it took:
    /// slices cut anywhere (some empty, some starting past 0) write what the same deliveries as
    /// one array write, grouped across the slices.
    @Test func slicesWriteWhatTheSameDeliveriesInOneArrayWrite() throws {
        var samples = WireSamples(seed: 13)
        for _ in 0..<20 {
            let deliveries = Self.poll(&samples, messages: samples.int(1...8), recipients: samples.int(2...64))
            var cuts = (0..<samples.int(1...4)).map { _ in samples.int(0...deliveries.count) }
            cuts = [0] + cuts.sorted() + [deliveries.count]
            let chunks = zip(cuts, cuts.dropFirst()).map { deliveries[$0..<$1] }
            var sliced = ByteBuffer()
            sliced.writeDeliveriesFrames(attachID: 9, chunks: chunks, maximumPayloadSize: 4096)
            var whole = ByteBuffer()
            whole.writeDeliveriesFrames(attachID: 9, deliveries, maximumPayloadSize: 4096)
            #expect(sliced == whole)
        }
    }

    @Test func aFrameTooBigIsSplitWithTheGroupsEnvelopeRepeated() throws {
        var samples = WireSamples(seed: 11)
        let deliveries = Self.poll(&samples, messages: 3, recipients: 256)
        let limit = 4096
        var direct = ByteBuffer()
        direct.writeDeliveriesFrames(attachID: 3, deliveries, maximumPayloadSize: limit)
        let frames = try Self.frames(direct, limit: limit)
        #expect(frames.count > 10, "256 recipients of about 200 bytes need 13 or more frames of 4 KiB")
        var received: [WireDelivery] = []
        for frame in frames {
            #expect(frame.requestID == 3)
            guard case .deliveries(let carried) = frame.message else {
                Issue.record("not a DELIVERIES frame: \(frame.opcode)")
                continue
            }
            #expect(!carried.isEmpty)
            received += carried
        }
        #expect(received == Self.grouped(deliveries))
    }

    /// A received frame's deliveries keep their tokens in one block they share: each reads back
    /// its own token, equals and hashes as the delivery that was sent, and a cluster node that
    /// forwards them writes the frame it received.
    @Test func receivedDeliveriesKeepTheirTokensAndWriteTheSameFrame() throws {
        var samples = WireSamples(seed: 14)
        for _ in 0..<10 {
            let sent = Self.grouped(Self.poll(&samples, messages: samples.int(1...6), recipients: samples.int(1...200)))
            var bytes = ByteBuffer()
            bytes.writeDeliveriesFrames(attachID: 4, sent, maximumPayloadSize: FrameHeader.defaultMaximumPayloadSize)
            var received: [WireDelivery] = []
            for frame in try Self.frames(bytes) {
                guard case .deliveries(let carried) = frame.message else { throw ProtocolError(.internal, "not DELIVERIES") }
                received += carried
            }
            #expect(received == sent)
            #expect(received.map(\.hashValue) == sent.map(\.hashValue))
            #expect(received.map(\.token) == sent.map(\.token))
            #expect(received.allSatisfy { delivery in
                if case .kept? = delivery.token?.text { true } else { delivery.token == nil }
            }, "each token is kept in the frame's block, none made a String")
            #expect(received.map { $0.withTokenBytes { Array($0) } } == sent.map { $0.token.map { Array($0.value.utf8) } })

            var forwarded = ByteBuffer()
            forwarded.writeDeliveriesFrames(attachID: 4, received, maximumPayloadSize: FrameHeader.defaultMaximumPayloadSize)
            #expect(forwarded == bytes)

            // Set through `token`, a received delivery's token is a value of its own.
            var changed = received[0]
            changed.token = RegistrationToken("replaced")
            #expect(changed.token?.value == "replaced" && changed != received[0] && received[0] == sent[0])
            changed.token = nil
            #expect(changed.token == nil && changed.withTokenBytes { $0.count } == nil)
        }
    }

    @Test func aDeliveryThatCannotFitGetsAnErrorAndTheOthersGo() throws {
        var samples = WireSamples(seed: 12)
        var deliveries = Self.poll(&samples, messages: 2, recipients: 10)
        deliveries[4].token = RegistrationToken(String(repeating: "x", count: 3000))  // over the limit with any envelope
        let limit = 2048 + deliveries.map(\.payload.count).max()!
        var direct = ByteBuffer()
        direct.writeDeliveriesFrames(attachID: 5, deliveries, maximumPayloadSize: limit)
        var received: [WireDelivery] = []
        var errors: [FanoutError] = []
        for frame in try Self.frames(direct, limit: limit) {
            switch frame.message {
            case .deliveries(let carried): received += carried
            case .error(let error): errors.append(error)
            default: Issue.record("unexpected \(frame.opcode)")
            }
        }
        #expect(errors.map(\.code) == [.resourceExhausted])
        var expected = deliveries
        expected.remove(at: 4)
        #expect(received == Self.grouped(expected))
    }
}
