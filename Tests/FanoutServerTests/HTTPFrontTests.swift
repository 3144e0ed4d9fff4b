import FanoutCore
import FanoutHTTP
import FanoutKeys
import FanoutTestSupport
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

/// The HTTP front over real sockets (Hummingbird's live test client): FCM's v1 send with its
/// answers and Google's error shape, authentication, health, the JWK Set.
@Suite("HTTP front")
struct HTTPFrontTests {
    static func withFront(
        configuration: EngineConfiguration = EngineConfiguration(),
        clock: any WallClock = SystemWallClock(),
        _ body: @Sendable (any TestClientProtocol, Engine) async throws -> Void
    ) async throws {
        try await TemporaryDirectory.with { directory in
            let engine = try Engine(directory: directory, configuration: configuration, clock: clock)
            defer { try? engine.close() }
            let tokens = try LoopbackServer.tokens(in: directory)
            _ = try await engine.register(RegistrationRequest(token: RegistrationToken("http-token-1")!, platform: .android, appID: AppID("1:1:android:a")!))
            let front = HTTPFront(engine: engine, keys: { LoopbackServer.keys }, tokens: tokens)
            let application = Application(router: front.router(), server: front.http1(), configuration: .init(address: .hostname("127.0.0.1", port: 0)))
            try await application.test(.live) { client in try await body(client, engine) }
        }
    }

    static func bearer(_ key: String) -> HTTPFields { [.authorization: "Bearer \(key)", .contentType: "application/json"] }

    static func json(_ buffer: ByteBuffer) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(buffer.readableBytesView)) as? [String: Any])
    }

    /// The `error` object and the `errorCode` of its FcmError detail.
    static func googleError(_ buffer: ByteBuffer) throws -> (error: [String: Any], errorCode: String?, violations: [String]) {
        let error = try #require(try Self.json(buffer)["error"] as? [String: Any])
        let details = error["details"] as? [[String: Any]] ?? []
        let fcm = details.first { $0["@type"] as? String == "type.googleapis.com/google.firebase.fcm.v1.FcmError" }
        let badRequest = details.first { $0["@type"] as? String == "type.googleapis.com/google.rpc.BadRequest" }
        let violations = (badRequest?["fieldViolations"] as? [[String: Any]] ?? []).compactMap { $0["field"] as? String }
        return (error, fcm?["errorCode"] as? String, violations)
    }

    @Test func aSendAnswersWithTheMessageNameAndQueuesTheDelivery() async throws {
        try await Self.withFront { client, engine in
            let body = ByteBuffer(string: #"{"message":{"token":"http-token-1","data":{"CONFIG_STATE":"STALE"}}}"#)
            do {
                let response = try await client.execute(uri: "/v1/projects/default/messages:send", method: .post, headers: Self.bearer(LoopbackServer.adminKey), body: body)
                #expect(response.status == .ok)
                let name = try #require(try Self.json(response.body)["name"] as? String)
                #expect(name.hasPrefix("projects/default/messages/"))
            }
            #expect(try engine.pendingDeliveries(for: .token(RegistrationToken("http-token-1")!)).count == 1)
            // validate_only: FCM's fake id, nothing queued.
            let dry = ByteBuffer(string: #"{"validate_only":true,"message":{"token":"http-token-1","data":{"k":"v"}}}"#)
            do {
                let response = try await client.execute(uri: "/v1/projects/default/messages:send", method: .post, headers: Self.bearer(LoopbackServer.adminKey), body: dry)
                #expect(try Self.json(response.body)["name"] as? String == "projects/default/messages/fake_message_id")
            }
            #expect(try engine.pendingDeliveries(for: .token(RegistrationToken("http-token-1")!)).count == 1)
        }
    }

    @Test func errorsComeInGooglesShapeWithFCMsStatuses() async throws {
        try await Self.withFront { client, _ in
            let uri = "/v1/projects/default/messages:send"
            let good = ByteBuffer(string: #"{"message":{"token":"http-token-1","data":{"k":"v"}}}"#)
            // No credential, a wrong one, a role that may not send, another project.
            do {
                let response = try await client.execute(uri: uri, method: .post, body: good)
                #expect(response.status == .unauthorized)
                #expect(try Self.googleError(response.body).error["status"] as? String == "UNAUTHENTICATED")
            }
            do {
                let response = try await client.execute(uri: uri, method: .post, headers: Self.bearer("not-a-key-0000000000"), body: good)
                #expect(response.status == .unauthorized)
            }
            do {
                let response = try await client.execute(uri: uri, method: .post, headers: Self.bearer(LoopbackServer.consumerKey), body: good)
                #expect(response.status == .forbidden)
                #expect(try Self.googleError(response.body).error["status"] as? String == "PERMISSION_DENIED")
            }
            do {
                let response = try await client.execute(uri: uri, method: .post, headers: Self.bearer(LoopbackServer.shopAdminKey), body: good)
                #expect(response.status == .forbidden)
            }
            // An invalid message: 400, FcmError INVALID_ARGUMENT and the field violations.
            let bad = ByteBuffer(string: #"{"message":{"token":"http-token-1","android":{"ttl":"-5s"},"data":{"from":"x"}}}"#)
            do {
                let response = try await client.execute(uri: uri, method: .post, headers: Self.bearer(LoopbackServer.adminKey), body: bad)
                #expect(response.status == .badRequest)
                let (error, errorCode, violations) = try Self.googleError(response.body)
                #expect(error["code"] as? Int == 400 && error["status"] as? String == "INVALID_ARGUMENT" && errorCode == "INVALID_ARGUMENT")
                #expect(Set(violations) == ["message.android.ttl", "message.data.from"])
            }
            // An unknown token: 404 NOT_FOUND with errorCode UNREGISTERED (firebase-admin's UnregisteredError).
            let unknown = ByteBuffer(string: #"{"message":{"token":"nobody-has-this","data":{"k":"v"}}}"#)
            do {
                let response = try await client.execute(uri: uri, method: .post, headers: Self.bearer(LoopbackServer.adminKey), body: unknown)
                #expect(response.status == .notFound)
                let (error, errorCode, _) = try Self.googleError(response.body)
                #expect(error["status"] as? String == "NOT_FOUND" && errorCode == "UNREGISTERED")
            }
            // A project that does not exist, and a malformed body.
            do {
                let response = try await client.execute(uri: "/v1/projects/no-such-app/messages:send", method: .post, headers: Self.bearer(LoopbackServer.adminKey), body: good)
                #expect(response.status == .notFound)
                #expect(try Self.googleError(response.body).errorCode == nil, "a missing project is not an unregistered token")
            }
            do {
                let response = try await client.execute(uri: uri, method: .post, headers: Self.bearer(LoopbackServer.adminKey), body: ByteBuffer(string: "{not json"))
                #expect(response.status == .badRequest)
                #expect(try Self.googleError(response.body).violations == ["body"])
            }
        }
    }

    /// Past the project's send quota: 429 with Retry-After, FcmError QUOTA_EXCEEDED and a
    /// google.rpc.QuotaFailure naming the project; nothing queued.
    @Test func aSendOverTheQuotaIs429WithRetryAfter() async throws {
        var configuration = EngineConfiguration()
        configuration.sendQuota = SendQuota(projectMessagesPerMinute: 2, deviceMessagesPerMinute: nil, deviceMessagesPerHour: nil)
        try await Self.withFront(configuration: configuration, clock: ManualClock()) { client, engine in
            let body = ByteBuffer(string: #"{"message":{"token":"http-token-1","data":{"k":"v"}}}"#)
            for _ in 0..<2 {
                let response = try await client.execute(uri: "/v1/projects/default/messages:send", method: .post, headers: Self.bearer(LoopbackServer.adminKey), body: body)
                #expect(response.status == .ok)
            }
            let response = try await client.execute(uri: "/v1/projects/default/messages:send", method: .post, headers: Self.bearer(LoopbackServer.adminKey), body: body)
            #expect(response.status == .tooManyRequests)
            #expect(response.headers[.retryAfter] == "30", "2 a minute, both taken at one instant: the next is due in 30 s")
            let (error, errorCode, _) = try Self.googleError(response.body)
            #expect(error["code"] as? Int == 429 && error["status"] as? String == "RESOURCE_EXHAUSTED" && errorCode == "QUOTA_EXCEEDED")
            let quotaFailure = (error["details"] as? [[String: Any]])?.first { $0["@type"] as? String == "type.googleapis.com/google.rpc.QuotaFailure" }
            #expect((quotaFailure?["violations"] as? [[String: Any]])?.first?["subject"] as? String == "project")
            #expect(try engine.pendingDeliveries(for: .token(RegistrationToken("http-token-1")!)).count == 2)
        }
    }

    @Test func healthReadinessAndTheJWKSet() async throws {
        try await Self.withFront { client, _ in
            #expect(try await client.execute(uri: "/healthz", method: .get).status == .ok)
            #expect(try await client.execute(uri: "/readyz", method: .get).status == .ok)
            do {
                let response = try await client.execute(uri: "/.well-known/jwks.json", method: .get)
                #expect(response.status == .ok)
                let keys = try #require(try Self.json(response.body)["keys"] as? [[String: Any]])
                #expect(keys.first?["kty"] as? String == "EC" && keys.first?["alg"] as? String == "ES256")
            }
            do {
                // Unknown paths and methods, and a body over the limit: Google's shape, and the listener stays.
                let response = try await client.execute(uri: "/no/such/path", method: .get)
                #expect(response.status == .notFound)
                #expect(try Self.googleError(response.body).error["status"] as? String == "NOT_FOUND")
            }
            #expect(try await client.execute(uri: "/healthz", method: .delete).status == .notFound)
            do {
                let huge = ByteBuffer(repeating: UInt8(ascii: "x"), count: HTTPFront.maximumBodySize + 1)
                let response = try await client.execute(uri: "/v1/projects/default/messages:send", method: .post, headers: Self.bearer(LoopbackServer.adminKey), body: huge)
                #expect(response.status == .badRequest)
                #expect(try Self.googleError(response.body).violations == ["body"])
            }
            #expect(try await client.execute(uri: "/healthz", method: .get).status == .ok)
        }
    }

    /// FCM v1's topicSubscriptions (by token or FID) and the Instance ID batch calls and info, as
    /// firebase-admin sends them.
    @Test func topicsAreManagedAsTheSDKsDoIt() async throws {
        try await Self.withFront { client, engine in
            let token = RegistrationToken("http-token-1")!
            let fid = try engine.installation(.token(token)).fid.description
            let admin = Self.bearer(LoopbackServer.adminKey)
            do {
                let response = try await client.execute(uri: "/v1/projects/default/registrations/http-token-1/topicSubscriptions?topic_name=news", method: .post, headers: admin, body: ByteBuffer(string: "{}"))
                #expect(response.status == .ok)
            }
            do {
                let response = try await client.execute(uri: "/v1/projects/default/registrations/\(fid)/topicSubscriptions?topic_name=sports", method: .post, headers: admin, body: ByteBuffer(string: "{}"))
                #expect(response.status == .ok)
            }
            #expect(try engine.topics(of: .token(token)).map(\.value) == ["news", "sports"])
            do {
                let response = try await client.execute(uri: "/v1/projects/default/registrations/nobody-token/topicSubscriptions?topic_name=news", method: .post, headers: admin, body: ByteBuffer(string: "{}"))
                #expect(response.status == .notFound)
                #expect(try Self.googleError(response.body).errorCode == "UNREGISTERED")
            }
            do {
                let response = try await client.execute(uri: "/v1/projects/default/registrations/http-token-1/topicSubscriptions?topic_name=bad%20name", method: .post, headers: admin, body: ByteBuffer(string: "{}"))
                #expect(response.status == .badRequest)
            }
            do {
                let response = try await client.execute(uri: "/v1/projects/default/registrations/http-token-1/topicSubscriptions/sports?allow_missing=true", method: .delete, headers: admin)
                #expect(response.status == .ok)
            }
            #expect(try engine.topics(of: .token(token)).map(\.value) == ["news"])

            // The Instance ID form: results in input order.
            let add = ByteBuffer(string: #"{"to":"/topics/weather","registration_tokens":["http-token-1","nobody-token"]}"#)
            do {
                let response = try await client.execute(uri: "/iid/v1:batchAdd", method: .post, headers: admin, body: add)
                #expect(response.status == .ok)
                let results = try #require(try Self.json(response.body)["results"] as? [[String: Any]])
                #expect(results.count == 2 && results[0].isEmpty && results[1]["error"] as? String == "NOT_FOUND")
            }
            do {
                let response = try await client.execute(uri: "/iid/info/http-token-1?details=true", method: .get, headers: admin)
                let info = try Self.json(response.body)
                #expect(info["platform"] as? String == "ANDROID" && info["application"] as? String == "1:1:android:a")
                let topics = try #require((info["rel"] as? [String: Any])?["topics"] as? [String: Any])
                #expect(Set(topics.keys) == ["news", "weather"])
            }
            do {
                let remove = ByteBuffer(string: #"{"to":"weather","registration_tokens":["http-token-1"]}"#)
                let response = try await client.execute(uri: "/iid/v1:batchRemove", method: .post, headers: admin, body: remove)
                #expect(try #require(try Self.json(response.body)["results"] as? [[String: Any]]).first?.isEmpty == true)
            }
            #expect(try engine.topics(of: .token(token)).map(\.value) == ["news"])
            do {
                let response = try await client.execute(uri: "/iid/v1:batchAdd", method: .post, body: add)
                #expect(response.status == .unauthorized)
                #expect(try Self.json(response.body)["error"] as? String == "Unauthorized")
            }
            do {
                let response = try await client.execute(uri: "/iid/v1:batchAdd", method: .post, headers: admin, body: ByteBuffer(string: #"{"to":"/topics/a"}"#))
                #expect(response.status == .badRequest)
            }
        }
    }
}
