@testable import FanoutCore
import FanoutModel
import FanoutTestSupport
import Testing

@Suite("DeliverySink")
struct DeliverySinkTests {
    static func deliveries(_ ids: Range<UInt64>, fid: FID) -> [Delivery] {
        ids.map { sequence in
            Delivery(
                id: DeliveryID(messageSequence: sequence, slot: 1), fid: fid, token: nil, apnsToken: nil,
                platform: .android, expiry: Timestamp(millisecondsSinceEpoch: 0), references: DeliveryReferences(project: .default),
                messageIndex: Delivery.noMessage, isInFlight: false
            )
        }
    }

    /// Random pushes (hand-outs of 1...300) and takes (`poll` or `pollSlices` of 1...400, or one `next()`),
    /// checked against a plain queue of ids: every delivery comes out once, in push order, and
    /// a take returns as many as it may.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func takesWhatWasPushedInOrder(seed: UInt64) async {
        var random = SeededRandomNumberGenerator(seed: seed)
        var samples = WireSamples(seed: seed)
        let fid = samples.fid()
        let sink = DeliverySink()
        var model: [UInt64] = []
        var modelStart = 0
        var next: UInt64 = 1
        for _ in 0..<3000 {
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<4:
                let count = UInt64.random(in: 1...300, using: &random)
                sink.push(contentsOf: Self.deliveries(next..<(next + count), fid: fid))
                model.append(contentsOf: next..<(next + count))
                next += count
            case 4..<9:
                // Half the takes as slices of the hand-outs (the server's), flattened.
                let maximum = Int.random(in: 1...400, using: &random)
                let taken = Bool.random(using: &random)
                    ? sink.poll(maximum: maximum).map(\.id.messageSequence)
                    : sink.pollSlices(maximum: maximum, orWhenReady: {}).slices.flatMap { $0.map(\.id.messageSequence) }
                let expected = Array(model[modelStart..<min(model.count, modelStart + maximum)])
                #expect(taken == expected)
                modelStart += expected.count
            default:
                guard modelStart < model.count else { continue }
                #expect(await sink.next()?.id.messageSequence == model[modelStart])
                modelStart += 1
            }
        }
        #expect(sink.poll(maximum: .max).map(\.id.messageSequence) == Array(model[modelStart...]))
        sink.finish()
        #expect(await sink.next() == nil)
    }
}
