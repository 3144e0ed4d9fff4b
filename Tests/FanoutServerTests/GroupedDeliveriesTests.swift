import FanoutClient
import FanoutCore
import FanoutServer
import FanoutTestSupport
import FanoutWire
import NIOCore
import Testing

/// ATTACH_GROUPED over loopback: its stream is DELIVERIES frames, and it hands out the same
/// deliveries as ATTACH, within the same credit.
@Suite("Server: grouped deliveries", .timeLimit(.minutes(1)))
struct GroupedDeliveriesTests {
    /// 30 installations per platform (iOS ones with APNs tokens), all subscribed to `all`.
    static func register(_ engine: Engine) async throws {
        try await engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in
            var tokens: [String] = []
            for platform in Platform.allCases {
                for index in 0..<30 {
                    let token = "grouped-\(platform)-\(index)"
                    let apnsToken = platform == .ios ? APNsDeviceToken(String(repeating: "a", count: 62) + String(index + 10)) : nil
                    try changes.register(RegistrationRequest(
                        token: RegistrationToken(token), platform: platform, appID: AppID("1:1:\(platform):a")!, apnsToken: apnsToken
                    ))
                    tokens.append(token)
                }
            }
            _ = try changes.subscribe(tokens.addresses, to: TopicName("all")!)
        }.durable()
    }

    @Test func aGroupedAttachmentGetsWhatAPlainOneGetsWithinItsCredit() async throws {
        try await TemporaryDirectory.with { directory in
            try await LoopbackServer.serve(directory: directory) { port, engine in
                try await Self.register(engine)
                let admin = try await LoopbackServer.connect(port)
                for body in [
                    #"{"message":{"topic":"all","data":{"n":"1"}}}"#,
                    #"{"message":{"topic":"all","notification":{"title":"Hi"},"apns":{"headers":{"apns-collapse-id":"c1"}},"webpush":{"headers":{"Urgency":"high"}}}}"#,
                    #"{"message":{"topic":"all","android":{"ttl":"60s","collapse_key":"k"},"data":{"n":"3"}}}"#,
                ] {
                    #expect(try await admin.send(body).enqueued == 90)
                }
                for platform in Platform.allCases {
                    // A plain attachment takes all 90 of the platform, then lets them go.
                    let plain = try await LoopbackServer.connect(port, key: LoopbackServer.consumerKey, role: .consumer)
                    let plainStream = try await plain.attach(.platform(platform), credit: 1000, grouped: false)
                    var plainDeliveries: [WireDelivery] = []
                    while plainDeliveries.count < 90 { plainDeliveries += try await plainStream.nextBatch() }
                    try await plain.detach()
                    try await plain.close()

                    // A grouped one gets them again, never holding more than its credit.
                    let worker = try await LoopbackServer.connect(port, key: LoopbackServer.consumerKey, role: .consumer)
                    let stream = try await worker.attach(.platform(platform), credit: 40)
                    var grouped: [WireDelivery] = []
                    var acknowledged = 0
                    while grouped.count < 90 {
                        let batch = try await stream.nextBatch()
                        grouped += batch
                        #expect(grouped.count - acknowledged <= 40, "\(grouped.count - acknowledged) held over a credit of 40")
                        acknowledged += try await worker.acknowledge(batch.map(\.id))
                    }
                    #expect(plainDeliveries.count == 90 && grouped.count == 90)
                    #expect(Set(grouped) == Set(plainDeliveries), "\(platform)")
                    // Tokens come from the registry's storage: each installation's own, on both streams.
                    let registered = Set((0..<30).map { "grouped-\(platform)-\($0)" })
                    #expect(Set(grouped.compactMap { $0.token?.value }) == registered)
                    #expect(Set(plainDeliveries.compactMap { $0.token?.value }) == registered)
                    #expect(acknowledged == 90)
                    #expect(Set(grouped.map(\.payload)).count == 3, "three messages, each rendered once for \(platform)")
                    if platform == .ios {
                        #expect(grouped.allSatisfy { $0.apnsToken != nil })
                        #expect(grouped.contains { $0.headers.contains(DeliveryHeader(name: "apns-collapse-id", value: "c1")) })
                    }
                    try await worker.detach()
                    try await worker.close()
                }
                #expect(try await admin.statistics().deliveries.pending == 0)
                try await admin.close()
            }
        }
    }

    /// On the wire: ATTACH_GROUPED is answered with its own reply opcode, then the backlog comes
    /// as DELIVERIES frames carrying the ATTACH_GROUPED's request id.
    @Test func attachGroupedIsAnsweredThenStreamsDeliveriesFrames() async throws {
        try await TemporaryDirectory.with { directory in
            try await LoopbackServer.serve(directory: directory) { port, engine in
                try await Self.register(engine)
                let admin = try await LoopbackServer.connect(port)
                let sent = try await admin.send(#"{"message":{"topic":"all","data":{"n":"1"}}}"#)
                try await admin.close()
                let raw = try await RawConnection.open(port)
                try await raw.channel.executeThenClose { inbound, outbound in
                    var frames = inbound.makeAsyncIterator()
                    try await outbound.write(try RawConnection.hello(key: LoopbackServer.consumerKey, role: .consumer))
                    let attach = ClientRequest.attach(project: "default", scope: .platform(.web), credit: 100, grouped: true)
                    #expect(attach.opcode.rawValue == 0x64)
                    try await outbound.write(try RawConnection.bytes(ClientFrame(requestID: 2, request: attach)))
                    let answers = try await RawConnection.frames(2, from: &frames)
                    #expect(answers.map(\.opcode.rawValue) == [0x81, 0xE4])
                    var deliveries: [WireDelivery] = []
                    while deliveries.count < 30, let frame = try await frames.next() {
                        #expect(frame.opcode.rawValue == 0xF1 && frame.requestID == 2)
                        guard case .deliveries(let carried) = frame.message else { break }
                        deliveries += carried
                    }
                    #expect(deliveries.count == 30)
                    #expect(Set(deliveries.map(\.id.messageSequence)) == [sent.sequence])
                    #expect(deliveries.allSatisfy { $0.platform == .web && $0.token != nil })
                }
            }
        }
    }
}
