import FanoutClient
import FanoutCore
import FanoutKeys
import FanoutServer
import FanoutTestSupport
import FanoutWire
import Foundation
import NIOCore
import Testing

/// A device as its own principal (docs/security.md), over real sockets: the seeds' flow as a
/// device runs it, and every way a credential is refused.
@Suite("Server: devices")
struct DeviceTests {
    static func device(_ port: Int, _ credential: Hello.Credential) async throws -> FanoutClient {
        try await FanoutClient.connect(host: "127.0.0.1", port: port, credential: credential, role: .device)
    }

    static func auth(_ token: String) -> Hello.Credential { .installationAuthToken(Array(token.utf8)) }
    static func refresh(_ token: String) -> Hello.Credential { .installationRefreshToken(Array(token.utf8)) }

    /// Register itself with the app's key and get its credentials in the reply, connect as itself,
    /// subscribe to PUSH_RC, receive the stale-config message, refresh the auth token with the
    /// refresh token, be deleted and lose access.
    @Test func theSeedFlowAsADeviceRunsIt() async throws {
        try await TemporaryDirectory.with { directory in
            let tokens = try LoopbackServer.tokens(in: directory)
            try await LoopbackServer.withServer(directory: directory + "/data", tokens: tokens) { server, _ in
                let port = server.localPort
                let admin = try await LoopbackServer.connect(port)
                _ = try await admin.register(RegistrationFields(token: "device-token-2", platform: .android, appID: "1:1:android:a"))

                // The device registers itself with the key its app ships with, and gets its credentials in the reply.
                let app = try await LoopbackServer.connect(port, key: LoopbackServer.appKey, role: .app)
                let fields = RegistrationFields(token: "device-token-1", platform: .android, appID: "1:1:android:a")
                let (registered, credentials) = try await app.registerWithCredentials(fields)
                let fid = registered.installation.fid.description
                #expect(!registered.isExisting && credentials.fid == fid && credentials.refreshToken.hasPrefix("rt1.default.\(fid)."))
                // The app's key creates installations and does nothing else: no takeover of one that exists.
                await #expect(throws: FanoutError(.alreadyExists, "", field: "token")) { _ = try await app.registerWithCredentials(fields) }
                await #expect(throws: FanoutError(.permissionDenied, "", field: "options")) {
                    _ = try await app.register(RegistrationFields(token: "device-token-3", platform: .android, appID: "1:1:android:a"))
                }
                await #expect(throws: FanoutError(.permissionDenied, "")) { _ = try await app.installation(fid) }
                await #expect(throws: FanoutError(.permissionDenied, "", field: "project")) { _ = try await app.registerWithCredentials(fields, in: "other-app") }
                #expect(try await admin.installation("device-token-1").fid.description == fid)
                #expect(try await admin.installationCount() == 2, "the refused registrations changed nothing")
                try await app.close()

                let device = try await Self.device(port, Self.auth(credentials.authToken.token))
                #expect(device.welcome.projects == ["default"])
                #expect(try await device.subscribe([fid], to: "PUSH_RC") == [.ok])
                #expect(try await device.subscribe(["device-token-1"], to: "news") == [.ok], "by its token too")
                await #expect(throws: FanoutError(.permissionDenied, "", field: "registrations[1]")) {
                    _ = try await device.subscribe([fid, "device-token-2"], to: "PUSH_RC")
                }
                await #expect(throws: FanoutError(.permissionDenied, "")) { _ = try await device.send(#"{"message":{"topic":"PUSH_RC","data":{"a":"b"}}}"#) }
                await #expect(throws: FanoutError(.unauthenticated, "", field: "project")) { _ = try await device.topics(of: fid, in: "other-app") }
                await #expect(throws: FanoutError(.permissionDenied, "", field: "registration")) { _ = try await device.installation("device-token-2") }
                #expect(try await device.topics(of: fid).sorted() == ["PUSH_RC", "news"])

                _ = try await admin.send(#"{"message":{"topic":"PUSH_RC","data":{"CONFIG_STATE":"STALE"}}}"#)
                await #expect(throws: FanoutError(.permissionDenied, "", field: "scope")) { _ = try await device.attach(.platform(.android), credit: 10) }
                let stream = try await device.attach(.installations([fid]), credit: 10)
                var deliveries = stream.makeAsyncIterator()
                let delivery = try #require(try await deliveries.next())
                #expect(delivery.fid.description == fid && String(decoding: delivery.payload, as: UTF8.self).contains(#""CONFIG_STATE":"STALE""#))
                #expect(try await device.acknowledge([delivery.id]) == 1)

                // A new auth token, by the refresh token: that connection may do nothing else.
                let refresher = try await Self.device(port, Self.refresh(credentials.refreshToken))
                let renewed = try await refresher.generateAuthToken(for: fid)
                await #expect(throws: FanoutError(.permissionDenied, "")) { _ = try await refresher.topics(of: fid) }
                await #expect(throws: FanoutError(.permissionDenied, "", field: "fid")) {
                    _ = try await refresher.generateAuthToken(for: try FID.generate().description)
                }
                try await refresher.close()
                let second = try await Self.device(port, Self.auth(renewed.token))
                #expect(try await second.installation(fid).fid.description == fid)

                // Deleted by itself: every credential stops at once, on open connections too.
                _ = try await second.deleteInstallation(fid: fid)
                await #expect(throws: (any Error).self) { _ = try await device.topics(of: fid) }
                await #expect(throws: FanoutError(.unauthenticated, "")) { _ = try await Self.device(port, Self.auth(renewed.token)) }
                await #expect(throws: FanoutError(.unauthenticated, "")) { _ = try await Self.device(port, Self.auth(credentials.authToken.token)) }
                await #expect(throws: FanoutError(.unauthenticated, "")) { _ = try await Self.device(port, Self.refresh(credentials.refreshToken)) }
                try await admin.close()
            }
        }
    }

    /// New credentials replace the old ones: the old auth and refresh tokens stop working, and an
    /// open connection on the old ones is closed with GOAWAY.
    @Test func reissuedCredentialsRevokeTheOldOnes() async throws {
        try await TemporaryDirectory.with { directory in
            let tokens = try LoopbackServer.tokens(in: directory)
            try await LoopbackServer.withServer(directory: directory + "/data", tokens: tokens) { server, _ in
                let port = server.localPort
                let admin = try await LoopbackServer.connect(port)
                _ = try await admin.register(RegistrationFields(token: "device-token-1", platform: .web, appID: "1:1:web:a"))
                let first = try await admin.issueCredentials(for: "device-token-1")
                let raw = try await RawConnection.open(port)
                let second = try await raw.channel.executeThenClose { inbound, outbound in
                    let hello = Hello(role: .device, credential: Self.auth(first.authToken.token))
                    try await outbound.write(try RawConnection.bytes(ClientFrame(requestID: 1, request: .hello(hello))))
                    var iterator = inbound.makeAsyncIterator()
                    var frames = try await RawConnection.frames(1, from: &iterator)
                    let second = try await admin.issueCredentials(for: "device-token-1")
                    while let frame = try? await iterator.next() { frames.append(frame) }
                    #expect(frames.map(\.message.opcode) == [Opcode.hello.reply, .goAway])
                    #expect(frames.last?.message == .goAway(.unauthenticated, "the installation was deleted or its credentials were replaced"))
                    return second
                }
                await #expect(throws: FanoutError(.unauthenticated, "")) { _ = try await Self.device(port, Self.auth(first.authToken.token)) }
                await #expect(throws: FanoutError(.unauthenticated, "")) { _ = try await Self.device(port, Self.refresh(first.refreshToken)) }
                try await Self.device(port, Self.auth(second.authToken.token)).close()
                try await admin.close()
            }
        }
    }

    /// Credentials survive a restart (the refresh token's digest is in the log and in snapshots).
    @Test func credentialsSurviveARestart() async throws {
        try await TemporaryDirectory.with { directory in
            let tokens = try LoopbackServer.tokens(in: directory)
            let credentials = try await LoopbackServer.withServer(directory: directory + "/data", tokens: tokens) { server, _ in
                let admin = try await LoopbackServer.connect(server.localPort)
                _ = try await admin.register(RegistrationFields(token: "device-token-1", platform: .ios, appID: "1:1:ios:a"))
                let credentials = try await admin.issueCredentials(for: "device-token-1")
                try await admin.close()
                return credentials
            }
            for snapshot in [false, true] {
                if snapshot {
                    let engine = try Engine(directory: directory + "/data")
                    _ = try engine.snapshot()
                    try engine.close()
                }
                try await LoopbackServer.withServer(directory: directory + "/data", tokens: tokens) { server, _ in
                    let device = try await Self.device(server.localPort, Self.auth(credentials.authToken.token))
                    #expect(try await device.installation(credentials.fid).token?.value == "device-token-1", "snapshot: \(snapshot)")
                    try await device.close()
                    let refresher = try await Self.device(server.localPort, Self.refresh(credentials.refreshToken))
                    _ = try await refresher.generateAuthToken(for: credentials.fid)
                    try await refresher.close()
                }
            }
        }
    }
}
