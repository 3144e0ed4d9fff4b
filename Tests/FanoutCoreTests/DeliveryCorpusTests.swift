import FanoutCore
import FanoutTestSupport
import Foundation
import Testing

/// The firebase-admin corpus sent through the engine to an installation on each platform: every
/// delivery carries that platform's rendered payload (fcm-rules.md sections 3 and 9), with FCM's
/// data keys where each platform puts them, and the platform's expiry.
@Suite("Deliveries of the firebase-admin corpus")
struct DeliveryCorpusTests {
    @Test(arguments: Platform.allCases)
    func everyCorpusMessageReachesEachPlatformWithItsPayload(platform: Platform) async throws {
        for (name, bytes) in MessageTests.corpus {
            let request = try MessageParser.parseSendRequest(bytes)
            let clock = ManualClock()
            let engine = Engine(clock: clock)
            // An installation the message's target reaches.
            // It has a token (installations without one get no delivery).
            var registration = RegistrationRequest(token: RegistrationToken("corpus-device-token"), platform: platform, appID: AppID("app")!)
            switch request.message.target {
            case .token(let token): registration.token = token
            case .fid(let fid): registration.offeredFID = fid.string
            default: break
            }
            let installation = try await engine.register(registration).installation
            switch request.message.target {
            case .topic(let topic):
                _ = try await engine.subscribe([installation.fid.string].addresses, to: topic)
            case .condition(let condition):
                for topic in condition.topics { _ = try await engine.subscribe([installation.fid.string].addresses, to: topic) }
            default:
                break
            }
            // A worker attached before the send also takes TTL-0 messages.
            let worker = try engine.attachConsumer(.platform(platform), credit: 10)
            let result = try await engine.send(bytes)
            if request.validateOnly {
                #expect(result.messageID.hasSuffix("/fake_message_id") && worker.poll().isEmpty, "\(name) is only validated")
                continue
            }
            #expect(result.enqueued == 1, "\(name) reaches the \(platform) installation")
            let deliveries = worker.poll()
            #expect(deliveries.count == 1, "\(name)")
            guard let delivery = deliveries.first else { continue }

            let expected = RenderedMessage(request.message, acceptedAt: clock.now())
            #expect(delivery.payload == expected.payload(for: platform), "\(name) \(platform) payload")
            #expect(delivery.expiry == expected.expiry(for: platform), "\(name) \(platform) expiry")
            #expect(delivery.fid == installation.fid)
            let payload = try #require(try JSONSerialization.jsonObject(with: Data(delivery.payload)) as? [String: Any], "\(name)")
            let data = request.message.data
            switch platform {
            case .ios:
                // APNs: `aps` plus the data keys at the top level.
                #expect(payload["aps"] is [String: Any], "\(name) has aps")
                for (key, value) in data { #expect(payload[key] as? String == value, "\(name) ios data \(key)") }
            case .android, .web:
                let rendered = payload["data"] as? [String: String] ?? [:]
                for (key, value) in data {
                    // The platform's own data, read from the corpus file with Foundation's parser.
                    let body = try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any]
                    let config = (body?["message"] as? [String: Any])?[platform == .android ? "android" : "webpush"] as? [String: Any]
                    let override = (config?["data"] as? [String: String])?[key]
                    #expect(rendered[key] == (override ?? value), "\(name) \(platform) data \(key)")
                }
                if let title = request.message.notification?.title {
                    let notification = payload["notification"] as? [String: Any]
                    #expect(notification?["title"] != nil, "\(name) \(platform) notification title \(title.count)")
                }
            }
            _ = try await worker.acknowledge([delivery.id])
            #expect(try engine.deliveryStatistics().messages == 0)
        }
    }
}
