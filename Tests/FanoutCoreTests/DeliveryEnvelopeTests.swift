import FanoutCore
import FanoutTestSupport
import Foundation
import Testing

/// What a delivery carries for its worker (the destination and the push service's headers), who
/// gets none (no token; stale when asked), and what a send reports per recipient and per platform.
@Suite("Delivery envelope and send reports")
struct DeliveryEnvelopeTests {
    static let start = Timestamp(millisecondsSinceEpoch: 1_767_225_600_000)  // 2026-01-01T00:00:00Z
    static let apnsToken = APNsDeviceToken(String(repeating: "0a1b", count: 16))!

    let clock = ManualClock(Self.start)
    let engine: Engine

    init() {
        self.engine = Engine(clock: self.clock)
    }

    private func register(_ platform: Platform, token: String, apnsToken: APNsDeviceToken? = nil) async throws -> Installation {
        try await self.engine.register(
            RegistrationRequest(token: RegistrationToken(token)!, platform: platform, appID: AppID("1:1:\(platform):a")!, apnsToken: apnsToken)
        ).installation
    }

    private func send(_ message: String, options: SendOptions = SendOptions()) async throws -> SendResult {
        try await self.engine.send(Array(#"{"message":\#(message)}"#.utf8), options: options)
    }

    private func pending(_ installation: Installation) throws -> [Delivery] {
        try self.engine.pendingDeliveries(for: .fid(installation.fid))
    }

    @Test func anIOSBackgroundPushCarriesItsAPNsTokenPriority5AndPushTypeBackground() async throws {
        let phone = try await self.register(.ios, token: "ios-1", apnsToken: Self.apnsToken)
        _ = try await self.send(#"{"token":"ios-1","data":{"k":"v"}}"#)
        let delivery = try #require(try self.pending(phone).first)
        #expect(delivery.token == RegistrationToken("ios-1"))
        #expect(delivery.apnsToken == Self.apnsToken)
        #expect(String(decoding: delivery.payload, as: UTF8.self) == #"{"aps":{"content-available":1},"k":"v"}"#)
        #expect(delivery.headers == [
            DeliveryHeader(name: "apns-priority", value: "5"),
            DeliveryHeader(name: "apns-push-type", value: "background"),
            DeliveryHeader(name: "apns-expiration", value: String(Self.start.millisecondsSinceEpoch / 1000 + 30 * 86_400)),
        ])
    }

    @Test func anAlertCarriesTheHeadersTheMessageGives() async throws {
        let phone = try await self.register(.ios, token: "ios-1", apnsToken: Self.apnsToken)
        let browser = try await self.register(.web, token: "web-1")
        let android = try await self.register(.android, token: "android-1")
        for installation in [phone, browser, android] {
            _ = try await self.engine.subscribe([.fid(installation.fid)], to: TopicName("news")!)
        }
        let apns = #""apns":{"headers":{"apns-collapse-id":"scores","apns-topic":"com.example.app","apns-expiration":"1767312000"}}"#
        let webpush = #""webpush":{"headers":{"TTL":"600","Urgency":"high","Topic":"scores"}}"#
        _ = try await self.send(#"{"topic":"news","notification":{"title":"Goal"},\#(apns),\#(webpush),"android":{"priority":"high"}}"#)
        #expect(try self.pending(phone).first?.headers == [
            DeliveryHeader(name: "apns-priority", value: "10"),
            DeliveryHeader(name: "apns-push-type", value: "alert"),
            DeliveryHeader(name: "apns-expiration", value: "1767312000"),
            DeliveryHeader(name: "apns-collapse-id", value: "scores"),
            DeliveryHeader(name: "apns-topic", value: "com.example.app"),
        ])
        let web = try #require(try self.pending(browser).first)
        #expect(web.headers == [
            DeliveryHeader(name: "TTL", value: "600"), DeliveryHeader(name: "Urgency", value: "high"), DeliveryHeader(name: "Topic", value: "scores"),
        ])
        #expect(web.expiry == Self.start.advanced(by: .seconds(600)))
        #expect(web.apnsToken == nil && web.token == RegistrationToken("web-1"))
        let androidDelivery = try #require(try self.pending(android).first)
        #expect(androidDelivery.headers.isEmpty, "Android's options are in its payload")
        #expect(String(decoding: androidDelivery.payload, as: UTF8.self).contains(#""priority":"high""#))
    }

    @Test func theEnvelopeSurvivesTheLog() async throws {
        try await TemporaryDirectory.with { directory in
            var engine = try Engine(directory: directory, durability: .always, clock: self.clock)
            let phone = try await engine.register(
                RegistrationRequest(token: RegistrationToken("ios-1"), platform: .ios, appID: AppID("1:1:ios:a")!, apnsToken: Self.apnsToken)
            ).installation
            let body = #"{"message":{"token":"ios-1","data":{"k":"v"},"apns":{"headers":{"apns-topic":"com.example.app"}},"webpush":{"headers":{"Urgency":"low"}}}}"#
            _ = try await engine.send(Array(body.utf8))
            let before = try engine.pendingDeliveries(for: .fid(phone.fid))
            try engine.close()
            engine = try Engine(directory: directory, durability: .always, clock: self.clock)
            defer { try? engine.close() }
            let after = try engine.pendingDeliveries(for: .fid(phone.fid))
            #expect(after.map(\.headers) == before.map(\.headers))
            #expect(after.first?.headers.last == DeliveryHeader(name: "apns-topic", value: "com.example.app"))
            #expect(after.first?.headers.contains(DeliveryHeader(name: "apns-push-type", value: "background")) == true)
            #expect(after.first?.message?.headers(for: .web).last == DeliveryHeader(name: "Urgency", value: "low"))
            #expect(after.map(\.apnsToken) == [Self.apnsToken])
        }
    }

    @Test func aSignedOutDeviceGetsNothingAndTheSendSaysWhy() async throws {
        let kept = try await self.register(.android, token: "a-1")
        let signedOut = try await self.register(.android, token: "a-2")
        try await self.engine.bindDevice(.fid(signedOut.fid), to: UserID("alice")!)
        for installation in [kept, signedOut] {
            _ = try await self.engine.subscribe([.fid(installation.fid)], to: TopicName("news")!)
        }
        _ = try await self.send(#"{"topic":"news","data":{"before":"sign-out"}}"#)
        #expect(try self.pending(signedOut).count == 1)
        try await self.engine.signOut(UserID("alice")!, on: .fid(signedOut.fid))
        #expect(try self.pending(signedOut).isEmpty, "what waited for the device goes with its token")
        #expect(try self.engine.deliveryStatistics().dropped == 1)

        let topic = try await self.send(#"{"topic":"news","data":{"k":"v"}}"#)
        #expect(topic.audience == 2 && topic.enqueued == 1)
        #expect(try self.pending(kept).count == 2)
        #expect(topic.platforms[0].audience == 2 && topic.platforms[0].enqueued == 1 && topic.platforms[0].skippedWithoutToken == 1)
        #expect(try self.pending(signedOut).isEmpty)

        let byFID = try await self.send(#"{"fid":"\#(signedOut.fid.string)","data":{"k":"v"}}"#)
        #expect(byFID.recipients == [.failed(FanoutError(.failedPrecondition, "", field: "message.fid"))])
        #expect(byFID.enqueued == 0)
        #expect(try self.engine.deliveryStatistics().skipped == 2)

        // A worker attached to the platform receives only the one with a token.
        let worker = try self.engine.attachConsumer(.platform(.android), credit: 10)
        let received = worker.poll(maximum: 10)
        #expect(received.map(\.fid) == [kept.fid, kept.fid])
        #expect(received.allSatisfy { $0.token != nil })
    }

    @Test func aSendMaySkipStaleInstallations() async throws {
        let fresh = try await self.register(.web, token: "w-1")
        let stale = try await self.register(.web, token: "w-2")
        for installation in [fresh, stale] {
            _ = try await self.engine.subscribe([.fid(installation.fid)], to: TopicName("news")!)
        }
        self.clock.advance(by: .seconds(31 * 86_400))
        try await self.engine.touch(.fid(fresh.fid))

        let skipping = try await self.send(#"{"topic":"news","data":{"k":"v"}}"#, options: SendOptions(skipStaleInstallations: true))
        #expect(skipping.enqueued == 1 && skipping.platforms[2].skippedStale == 1)
        #expect(try self.pending(stale).isEmpty)
        let multicast = try await self.send(#"{"fids":["\#(fresh.fid.string)","\#(stale.fid.string)"],"data":{"k":"v"}}"#, options: SendOptions(skipStaleInstallations: true))
        #expect(multicast.recipients.map(\.code) == [nil, .failedPrecondition])
        #expect(multicast.recipients[1] == .failed(FanoutError(.failedPrecondition, "", field: "message.fids[1]")))

        let everyone = try await self.send(#"{"topic":"news","data":{"k":"v"}}"#)
        #expect(everyone.enqueued == 2 && everyone.platforms[2].skippedStale == 0)
    }

    @Test func staleSkippingReplaysTheSameAfterARestart() async throws {
        try await TemporaryDirectory.with { directory in
            var engine = try Engine(directory: directory, durability: .always, clock: self.clock)
            var installations: [Installation] = []
            for index in 0..<3 {
                installations.append(try await engine.register(
                    RegistrationRequest(token: RegistrationToken("w-\(index)"), platform: .web, appID: AppID("1:1:web:a")!)
                ).installation)
                _ = try await engine.subscribe([.fid(installations[index].fid)], to: TopicName("news")!)
            }
            self.clock.advance(by: .seconds(31 * 86_400))
            try await engine.touch(.fid(installations[0].fid))
            let result = try await engine.send(Array(#"{"message":{"topic":"news","data":{"k":"v"}}}"#.utf8), options: SendOptions(skipStaleInstallations: true))
            #expect(result.enqueued == 1)
            // Later, every installation is fresh: replay must still skip those that were stale then.
            for installation in installations { try await engine.touch(.fid(installation.fid)) }
            try engine.close()
            engine = try Engine(directory: directory, durability: .always, clock: self.clock)
            defer { try? engine.close() }
            #expect(try installations.map { try engine.pendingDeliveries(for: .fid($0.fid)).count } == [1, 0, 0])
        }
    }

    @Test func validateOnlyReportsEachPlatformsSizeAgainstItsLimit() async throws {
        let padding = String(repeating: "p", count: 4100)
        let result = try await self.engine.send(Array(#"{"validate_only":true,"message":{"topic":"news","apns":{"payload":{"pad":"\#(padding)"}}}}"#.utf8))
        #expect(result.messageID.hasSuffix("fake_message_id") && result.audience == 0)
        #expect(result.platforms.map(\.platform) == [.android, .ios, .web])
        #expect(result.platforms[1].limit == 4096 && result.platforms[1].renderedBytes > 4100)
        #expect(result.platforms[1].refusal?.field == "message.apns")
        #expect(result.platforms[0].refusal == nil && result.platforms[2].refusal == nil)
        #expect(try self.engine.deliveryStatistics().sends == 0)
    }
}
