import FanoutCore
import FanoutHTTP
import FanoutKeys
import FanoutServer
import FanoutTestSupport
import FanoutWire
import Foundation
import Hummingbird
import HummingbirdTesting
import HTTPTypes
import NIOCore
import Testing

/// Firebase Installations' REST calls on the HTTP front, over real sockets, as the Firebase SDKs
/// make them: create with the app's key, a new auth token and deletion with the refresh token.
@Suite("HTTP front: Firebase Installations")
struct InstallationsHTTPTests {
    static func withFront(_ body: @Sendable (any TestClientProtocol, Engine, InstallationTokens) async throws -> Void) async throws {
        try await TemporaryDirectory.with { directory in
            let engine = try Engine(directory: directory)
            defer { try? engine.close() }
            let tokens = try LoopbackServer.tokens(in: directory)
            let front = HTTPFront(engine: engine, keys: { LoopbackServer.keys }, tokens: tokens)
            let application = Application(router: front.router(), server: front.http1(), configuration: .init(address: .hostname("127.0.0.1", port: 0)))
            try await application.test(.live) { client in try await body(client, engine, tokens) }
        }
    }

    static func appKey(_ key: String = LoopbackServer.appKey) -> HTTPFields {
        [HTTPField.Name("x-goog-api-key")!: key, .contentType: "application/json"]
    }

    static func fis(_ refreshToken: String) -> HTTPFields { [.authorization: "FIS_v2 \(refreshToken)", .contentType: "application/json"] }

    static func create(_ client: any TestClientProtocol, fid: String, appID: String = "1:1234:android:abcd", headers: HTTPFields = appKey()) async throws -> TestResponse {
        let body = #"{"fid":"\#(fid)","appId":"\#(appID)","authVersion":"FIS_v2","sdkVersion":"a:17.0.0"}"#
        return try await client.execute(uri: "/v1/projects/default/installations", method: .post, headers: headers, body: ByteBuffer(string: body))
    }

    @Test func aDeviceCreatesItselfRenewsItsTokenAndDeletesItself() async throws {
        try await Self.withFront { client, engine, tokens in
            let offered = try FID.generate().description
            let created = try await Self.create(client, fid: offered)
            #expect(created.status == .ok)
            let body = try HTTPFrontTests.json(created.body)
            #expect(body["fid"] as? String == offered, "a valid free FID is kept")
            #expect(body["name"] as? String == "projects/default/installations/\(offered)")
            let refreshToken = try #require(body["refreshToken"] as? String)
            let authToken = try #require(body["authToken"] as? [String: Any])
            #expect(authToken["expiresIn"] as? String == "\(tokens.lifetime)s")
            let claims = try tokens.verify(Array(try #require(authToken["token"] as? String).utf8), now: engine.clock.now().secondsSinceEpoch)
            #expect(claims.fid == offered && claims.project == "default" && claims.appID == "1:1234:android:abcd")
            let fid = try #require(FID(offered))
            #expect(try engine.installation(.fid(fid)).platform == .android, "the platform comes from the app id")

            // The app's key does not take over an installation that exists.
            let again = try await Self.create(client, fid: offered)
            #expect(again.status == .conflict)
            #expect(try HTTPFrontTests.googleError(again.body).error["status"] as? String == "ALREADY_EXISTS")

            let uri = "/v1/projects/default/installations/\(offered)/authTokens:generate"
            let generateBody = ByteBuffer(string: #"{"installation":{"sdkVersion":"a:17.0.0"}}"#)
            let renewed = try await client.execute(uri: uri, method: .post, headers: Self.fis(refreshToken), body: generateBody)
            #expect(renewed.status == .ok)
            let token = try #require(try HTTPFrontTests.json(renewed.body)["token"] as? String)
            #expect(try tokens.verify(Array(token.utf8), now: engine.clock.now().secondsSinceEpoch).fid == offered)

            let deleted = try await client.execute(uri: "/v1/projects/default/installations/\(offered)", method: .delete, headers: Self.fis(refreshToken))
            #expect(deleted.status == .ok)
            #expect(String(buffer: deleted.body) == "{}")
            #expect(throws: FanoutError.self) { try engine.installation(.fid(fid)) }
            let afterwards = try await client.execute(uri: uri, method: .post, headers: Self.fis(refreshToken), body: generateBody)
            #expect(afterwards.status == .notFound)
        }
    }

    /// A device deleted through the HTTP front loses its open TCP connection at once (GOAWAY), not
    /// only at its next request: the HTTP front tells the TCP listener's device connections.
    @Test(.timeLimit(.minutes(1)))
    func aDeletionOverHTTPEndsTheDevicesOpenConnection() async throws {
        try await TemporaryDirectory.with { directory in
            let tokens = try LoopbackServer.tokens(in: directory)
            try await LoopbackServer.withServer(directory: directory + "/data", tokens: tokens) { server, engine in
                let front = HTTPFront(
                    engine: engine, keys: { LoopbackServer.keys }, tokens: tokens,
                    credentialsChanged: { project in server.recheckDeviceCredentials(in: project.value) }
                )
                let application = Application(router: front.router(), server: front.http1(), configuration: .init(address: .hostname("127.0.0.1", port: 0)))
                try await application.test(.live) { client in
                    let fid = try FID.generate().description
                    let created = try HTTPFrontTests.json(try await Self.create(client, fid: fid).body)
                    let refreshToken = try #require(created["refreshToken"] as? String)
                    let authToken = try #require((created["authToken"] as? [String: Any])?["token"] as? String)
                    let raw = try await RawConnection.open(server.localPort)
                    try await raw.channel.executeThenClose { inbound, outbound in
                        let hello = Hello(role: .device, credential: .installationAuthToken(Array(authToken.utf8)))
                        try await outbound.write(try RawConnection.bytes(ClientFrame(requestID: 1, request: .hello(hello))))
                        var iterator = inbound.makeAsyncIterator()
                        var frames = try await RawConnection.frames(1, from: &iterator)
                        let deleted = try await client.execute(uri: "/v1/projects/default/installations/\(fid)", method: .delete, headers: Self.fis(refreshToken))
                        #expect(deleted.status == .ok)
                        // No request from the device: the server ends the connection on its own.
                        while let frame = try? await iterator.next() { frames.append(frame) }
                        #expect(frames.map(\.message.opcode) == [Opcode.hello.reply, .goAway])
                        #expect(frames.last?.message == .goAway(.unauthenticated, "the installation was deleted or its credentials were replaced"))
                    }
                }
            }
        }
    }

    @Test func refreshTokensProveOnlyTheirOwnInstallation() async throws {
        try await Self.withFront { client, engine, _ in
            let a = try FID.generate().description
            let b = try FID.generate().description
            let tokenA = try #require(try HTTPFrontTests.json(try await Self.create(client, fid: a).body)["refreshToken"] as? String)
            let tokenB = try #require(try HTTPFrontTests.json(try await Self.create(client, fid: b, appID: "1:1234:ios:abcd").body)["refreshToken"] as? String)
            #expect(try engine.installation(.fid(FID(b)!)).platform == .ios)
            let uri = "/v1/projects/default/installations/\(a)/authTokens:generate"
            let made = "rt1.default.\(a)." + Base64URL.encode([UInt8](repeating: 7, count: 32))
            let cases: [(String, HTTPFields)] = [
                ("no credential", [.contentType: "application/json"]),
                ("another installation's", Self.fis(tokenB)),
                ("made up", Self.fis(made)),
                ("not a refresh token", Self.fis("nonsense")),
                ("an API key", [.authorization: "Bearer \(LoopbackServer.adminKey)"]),
            ]
            for (what, headers) in cases {
                for (method, path) in [(HTTPRequest.Method.post, uri), (.delete, "/v1/projects/default/installations/\(a)")] {
                    let response = try await client.execute(uri: path, method: method, headers: headers, body: ByteBuffer(string: "{}"))
                    #expect(response.status == .unauthorized, "\(what) \(method)")
                    let error = try HTTPFrontTests.googleError(response.body).error
                    #expect(error["status"] as? String == "UNAUTHENTICATED", "\(what)")
                    #expect(!(error["message"] as? String ?? "").contains(tokenB), "never the token")
                }
            }
            // A's token names A in another project's path: it proves nothing there.
            let elsewhere = try await client.execute(uri: "/v1/projects/shop-app/installations/\(a)/authTokens:generate", method: .post, headers: Self.fis(tokenA))
            #expect(elsewhere.status == .unauthorized)
            #expect(try engine.installation(.fid(FID(a)!)).fid.description == a, "nothing was deleted")
        }
    }

    @Test func badCreatesAreRefusedWithTheField() async throws {
        try await Self.withFront { client, engine, _ in
            let fid = try FID.generate().description
            let cases: [(String, String, HTTPFields, HTTPResponse.Status, String?)] = [
                ("no platform in the app id", #"{"fid":"\#(fid)","appId":"my-app","authVersion":"FIS_v2"}"#, Self.appKey(), .badRequest, "appId"),
                ("no app id", #"{"fid":"\#(fid)","authVersion":"FIS_v2"}"#, Self.appKey(), .badRequest, "appId"),
                ("an unknown field", #"{"appId":"1:1:web:a","colour":"red"}"#, Self.appKey(), .badRequest, "colour"),
                ("another auth version", #"{"appId":"1:1:web:a","authVersion":"FIS_v1"}"#, Self.appKey(), .badRequest, "authVersion"),
                ("not JSON", "{", Self.appKey(), .badRequest, "body"),
                ("no key", #"{"appId":"1:1:web:a"}"#, [.contentType: "application/json"], .unauthorized, nil),
                ("a wrong key", #"{"appId":"1:1:web:a"}"#, Self.appKey("not-a-key"), .unauthorized, nil),
                ("a consumer's key", #"{"appId":"1:1:web:a"}"#, Self.appKey(LoopbackServer.consumerKey), .forbidden, nil),
            ]
            for (what, body, headers, status, field) in cases {
                let response = try await client.execute(uri: "/v1/projects/default/installations", method: .post, headers: headers, body: ByteBuffer(string: body))
                #expect(response.status == status, "\(what)")
                if let field { #expect(try HTTPFrontTests.googleError(response.body).violations == [field], "\(what)") }
            }
            // The app key is for `default` only.
            let other = try await client.execute(uri: "/v1/projects/shop-app/installations", method: .post, headers: Self.appKey(), body: ByteBuffer(string: #"{"appId":"1:1:web:a"}"#))
            #expect(other.status == .forbidden)
            #expect(try engine.installationCount() == 0, "nothing was registered")
            // An invalid offered FID is replaced, as Firebase Installations does.
            let replaced = try await Self.create(client, fid: "not a fid")
            #expect(replaced.status == .ok)
            #expect(try HTTPFrontTests.json(replaced.body)["fid"] as? String != "not a fid")
        }
    }
}

/// Registering with credentials logs the installation and its refresh token's digest in one
/// append: a crash between them cannot leave an installation its device holds no credentials for.
@Suite("Registration with credentials")
struct RegistrationWithCredentialsTests {
    @Test func theRegistrationAndItsCredentialAreOneAppend() async throws {
        try await TemporaryDirectory.with { directory in
            let tokens = try LoopbackServer.tokens(in: directory)
            let log = InMemoryChangeLog()
            let engine = Engine(log: log)
            let request = RegistrationRequest(token: RegistrationToken("atomic-1")!, platform: .android, appID: AppID("1:1:android:a")!)
            let now = engine.clock.now().secondsSinceEpoch
            let (result, credentials) = try await engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in
                try tokens.register(request, in: .default, creatingOnly: true, changes: &changes, now: now)
            }.durable()
            #expect(log.records.count == 2 && log.currentStatistics.batches == 1, "one append of both records")
            guard case .register(.default, let registered) = log.records.first, case .setCredential(.default, let fid, let digest) = log.records.last else {
                Issue.record("unexpected records \(log.records)")
                return
            }
            #expect(registered.fid == result.installation.fid && fid == result.installation.fid)
            #expect(digest == SHA256.hash(credentials.refreshToken.utf8), "the digest of the refresh token handed out")
            #expect(try tokens.verify(Array(credentials.authToken.token.utf8), now: now).fid == fid.description)

            // A repeat by an app's key changes nothing and logs nothing; by an admin it re-issues.
            await #expect(throws: FanoutError(.alreadyExists, "", field: "token")) {
                _ = try await engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in
                    try tokens.register(request, in: .default, creatingOnly: true, changes: &changes, now: now)
                }.durable()
            }
            #expect(log.records.count == 2)
            let again = try await engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in
                try tokens.register(request, in: .default, creatingOnly: false, changes: &changes, now: now)
            }.durable()
            #expect(again.result.isExisting && again.credentials.refreshToken != credentials.refreshToken)
            #expect(log.records.count == 3 && log.currentStatistics.batches == 2, "only the new credential")
        }
    }
}
