import FanoutCore
import FanoutTestSupport
import Foundation
import Testing

/// FCM's send quotas (`SendQuota`, fcm-rules.md 5.3): the project's messages a minute, a device's
/// a minute and an hour; a send over one is `RESOURCE_EXHAUSTED` with `retryAfter`, and takes nothing.
@Suite struct SendQuotaTests {
    let clock = ManualClock()

    private func engine(_ quota: SendQuota) -> Engine {
        var configuration = EngineConfiguration()
        configuration.sendQuota = quota
        return Engine(configuration: configuration, clock: self.clock)
    }

    @discardableResult
    private func register(_ token: String, in engine: Engine) async throws -> Installation {
        try await engine.register(
            RegistrationRequest(token: RegistrationToken(token)!, platform: .android, appID: AppID("1:1065473598624:android:d7820756")!)
        ).installation
    }

    private func send(_ message: String, to engine: Engine, validateOnly: Bool = false) async -> Result<SendResult, FanoutError> {
        let body = #"{"message":\#(message)\#(validateOnly ? #","validate_only":true"# : "")}"#
        do {
            return .success(try await engine.send(Array(body.utf8)))
        } catch {
            return .failure(error)
        }
    }

    private func refusal(_ outcome: Result<SendResult, FanoutError>) -> FanoutError? {
        guard case .failure(let error) = outcome, error.code == .resourceExhausted else { return nil }
        return error
    }

    private static let topicSend = #"{"topic":"news","data":{"k":"v"}}"#
    private static func tokenSend(_ token: String) -> String { #"{"token":"\#(token)","data":{"k":"v"}}"# }

    @Test func theProjectQuotaRefusesTheSendPastItAndTakesNothing() async throws {
        let engine = self.engine(SendQuota(projectMessagesPerMinute: 6, deviceMessagesPerMinute: nil, deviceMessagesPerHour: nil))
        let phone = try await self.register("phone", in: engine)
        #expect(try await engine.subscribe([.fid(phone.fid)], to: TopicName("news")!) == [.ok])
        for _ in 0..<6 {
            #expect(try await self.send(Self.topicSend, to: engine).get().enqueued == 1)
        }
        let refused = try #require(self.refusal(await self.send(Self.topicSend, to: engine)))
        #expect(refused.field == nil, "the project's quota, not a device's")
        #expect(refused.retryAfter == .seconds(10), "one message of 6 a minute is due in 10 s")
        #expect(try engine.deliveryStatistics().pending == 6, "the refused send queued nothing")

        self.clock.advance(by: .milliseconds(9999))
        #expect(self.refusal(await self.send(Self.topicSend, to: engine))?.retryAfter == .seconds(1), "1 ms to go, rounded up")
        self.clock.advance(by: .milliseconds(1))
        let next = try await self.send(Self.topicSend, to: engine).get()
        #expect(next.messageID == "projects/default/messages/7", "refused sends took no message id")
        #expect(self.refusal(await self.send(Self.topicSend, to: engine)) != nil, "one message fit, not two")
        // A project's quota is its own.
        try await engine.createProject(ProjectID("other-app")!)
        #expect(try await engine.send(Array(#"{"message":{"topic":"news"}}"#.utf8), in: ProjectID("other-app")!).audience == 0)
    }

    @Test func invalidAndDryRunSendsCountAndRefusedOnesDoNot() async throws {
        let engine = self.engine(SendQuota(projectMessagesPerMinute: 4, deviceMessagesPerMinute: nil, deviceMessagesPerHour: nil))
        // Two invalid sends and a dry run use three of four, as FCM counts its 4xx answers.
        for _ in 0..<2 {
            guard case .failure(let error) = await self.send(#"{"topic":"news","data":{"from":"x"}}"#, to: engine) else {
                Issue.record("a reserved data key was accepted")
                return
            }
            #expect(error.code == .invalidArgument)
        }
        _ = try await self.send(Self.topicSend, to: engine, validateOnly: true).get()
        _ = try await self.send(Self.topicSend, to: engine).get()
        let refused = try #require(self.refusal(await self.send(Self.topicSend, to: engine)))
        #expect(refused.retryAfter == .seconds(15))
        // Refusals by the quota do not count: 15 s later exactly one fits.
        for _ in 0..<5 { _ = await self.send(Self.topicSend, to: engine) }
        self.clock.advance(by: .seconds(15))
        _ = try await self.send(Self.topicSend, to: engine).get()
        #expect(self.refusal(await self.send(Self.topicSend, to: engine)) != nil)
    }

    @Test func aDeviceQuotaCountsSendsToThatDeviceOnly() async throws {
        let engine = self.engine(SendQuota(projectMessagesPerMinute: nil, deviceMessagesPerMinute: 3, deviceMessagesPerHour: nil))
        let phone = try await self.register("phone", in: engine)
        try await self.register("tablet", in: engine)
        #expect(try await engine.subscribe([.fid(phone.fid)], to: TopicName("news")!) == [.ok])
        _ = try await self.send(Self.tokenSend("phone"), to: engine).get()
        _ = try await self.send(#"{"fid":"\#(phone.fid.string)"}"#, to: engine).get()
        _ = try await self.send(Self.tokenSend("phone"), to: engine).get()
        // By FID or by token, it is the same device.
        let byFID = try #require(self.refusal(await self.send(#"{"fid":"\#(phone.fid.string)"}"#, to: engine)))
        #expect(byFID.field == "message.fid" && byFID.retryAfter == .seconds(20))
        #expect(self.refusal(await self.send(Self.tokenSend("phone"), to: engine))?.field == "message.token")
        // Another device, a topic reaching this one, and an unknown token are not limited by it.
        _ = try await self.send(Self.tokenSend("tablet"), to: engine).get()
        #expect(try await self.send(Self.topicSend, to: engine).get().enqueued == 1)
        #expect(try await self.send(Self.tokenSend("nobody"), to: engine).get().recipients.first?.code == .unregistered)
        #expect(try engine.pendingDeliveries(for: .fid(phone.fid)).count == 4, "three sends to it and the topic's")
        self.clock.advance(by: .seconds(20))
        _ = try await self.send(Self.tokenSend("phone"), to: engine).get()
        #expect(self.refusal(await self.send(Self.tokenSend("phone"), to: engine)) != nil)
    }

    @Test func theHourlyDeviceQuotaHoldsAfterTheMinutesRefill() async throws {
        let engine = self.engine(SendQuota(projectMessagesPerMinute: nil, deviceMessagesPerMinute: 2, deviceMessagesPerHour: 3))
        try await self.register("phone", in: engine)
        for _ in 0..<2 { _ = try await self.send(Self.tokenSend("phone"), to: engine).get() }
        #expect(self.refusal(await self.send(Self.tokenSend("phone"), to: engine))?.retryAfter == .seconds(30), "the minute's limit first")
        self.clock.advance(by: .seconds(60))
        _ = try await self.send(Self.tokenSend("phone"), to: engine).get()
        let hourly = try #require(self.refusal(await self.send(Self.tokenSend("phone"), to: engine)))
        #expect(hourly.retryAfter == .seconds(1140), "3 an hour: the next is due 1200 s after the first, which was 60 s ago")
        #expect(hourly.message.contains("an hour"))
    }

    @Test func aDeletedInstallationsCountsAreForgotten() async throws {
        let engine = self.engine(SendQuota(projectMessagesPerMinute: nil, deviceMessagesPerMinute: 1, deviceMessagesPerHour: nil))
        let phone = try await self.register("phone", in: engine)
        _ = try await self.send(Self.tokenSend("phone"), to: engine).get()
        #expect(self.refusal(await self.send(Self.tokenSend("phone"), to: engine)) != nil)
        try await engine.deleteInstallation(phone.fid)
        let next = try await self.register("next", in: engine)
        #expect(next.slot == phone.slot, "the slot is reused (else this test shows nothing)")
        _ = try await self.send(Self.tokenSend("next"), to: engine).get()
    }

    @Test func zeroOrNilIsNoLimit() async throws {
        let engine = self.engine(SendQuota(projectMessagesPerMinute: 0, deviceMessagesPerMinute: 0, deviceMessagesPerHour: nil))
        try await self.register("phone", in: engine)
        for _ in 0..<300 { _ = try await self.send(#"{"token":"phone","android":{"ttl":"0s"}}"#, to: engine).get() }
        let unlimited = self.engine(.unlimited)
        try await self.register("phone", in: unlimited)
        for _ in 0..<300 { _ = try await self.send(#"{"token":"phone","android":{"ttl":"0s"}}"#, to: unlimited).get() }
    }

    /// Random sends at random times against a reference: a bucket per limit holding up to a
    /// period's worth of time, refilled by the clock, each message costing period / count.
    @Test(arguments: [1, 2, 3]) func decisionsMatchTokenBuckets(seed: UInt64) async throws {
        let quota = SendQuota(projectMessagesPerMinute: 600, deviceMessagesPerMinute: 120, deviceMessagesPerHour: 300)
        let engine = self.engine(quota)
        for token in ["a", "b"] { try await self.register(token, in: engine) }
        struct Bucket {
            let capacity: Int64, cost: Int64
            var level: Int64
            init(_ count: Int, per period: Int64) { (self.capacity, self.cost, self.level) = (period, period / Int64(count), period) }
            mutating func refill(_ elapsed: Int64) { self.level = min(self.capacity, self.level + elapsed) }
            var wait: Int64? { self.level >= self.cost ? nil : self.cost - self.level }
        }
        var project = Bucket(600, per: 60_000)
        var devices = ["a": (Bucket(120, per: 60_000), Bucket(300, per: 3_600_000)), "b": (Bucket(120, per: 60_000), Bucket(300, per: 3_600_000))]
        var refusedBy = [0, 0, 0]
        var random = SeededRandomNumberGenerator(seed: seed)
        var refusals = 0
        // Three phases so that each limit binds: topic sends in quick succession (the project's
        // quota), sends to two devices spread out (the devices' minute, then hour), then a mix.
        for step in 0..<3000 {
            let phase = step / 1000
            let elapsed = Int64.random(in: [0...20, 0...200, 0...200][phase], using: &random)
            self.clock.advance(by: .milliseconds(elapsed))
            project.refill(elapsed)
            for key in devices.keys { devices[key]!.0.refill(elapsed); devices[key]!.1.refill(elapsed) }
            let target = [[nil], ["a", "b"], ["a", "b", nil]][phase].randomElement(using: &random)!
            var expectedWait = project.wait
            if expectedWait != nil { refusedBy[0] += 1 }
            if expectedWait == nil, let target {
                expectedWait = devices[target]!.0.wait
                if expectedWait != nil { refusedBy[1] += 1 }
            }
            if expectedWait == nil, let target {
                expectedWait = devices[target]!.1.wait
                if expectedWait != nil { refusedBy[2] += 1 }
            }
            let outcome = await self.send(target.map(Self.tokenSend) ?? Self.topicSend, to: engine)
            if let expectedWait {
                let refused = try #require(self.refusal(outcome), "the reference refuses this send")
                #expect(refused.retryAfter == .seconds((expectedWait + 999) / 1000))
                refusals += 1
            } else {
                _ = try outcome.get()
                project.level -= project.cost
                if let target { devices[target]!.0.level -= devices[target]!.0.cost; devices[target]!.1.level -= devices[target]!.1.cost }
            }
        }
        #expect(refusals < 2900 && refusedBy.allSatisfy { $0 > 50 }, "every limit refused, and sends got through (\(refusals) refusals: \(refusedBy))")
    }
}
