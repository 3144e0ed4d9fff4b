import FanoutClient
import FanoutCore
import FanoutKeys
import FanoutServer
import FanoutWire
import NIOCore
import FanoutTestSupport
import Testing

/// Who may do what (docs/wire-protocol.md section 4), and what happens to the connection.
@Suite("Server: authentication and permissions")
struct AuthenticationTests {
    @Test func aRequestBeforeHelloIsUnauthenticatedAndClosed() async throws {
        try await TemporaryDirectory.with { directory in
            try await LoopbackServer.serve(directory: directory) { port, _ in
                let raw = try await RawConnection.open(port)
                let frames = try await raw.exchange([try RawConnection.bytes(ClientFrame(requestID: 7, request: .listProjects))])
                #expect(frames.count == 1)
                #expect(frames.first?.requestID == 7)
                guard case .error(let error) = frames.first?.message else {
                    Issue.record("expected an error, got \(frames)")
                    return
                }
                #expect(error.code == .unauthenticated)
            }
        }
    }

    @Test(arguments: [
        ("no-such-key-00000000001", Hello.Role.admin),
        (LoopbackServer.consumerKey, Hello.Role.admin),
        ("", Hello.Role.admin),
    ])
    func aWrongKeyIsRefused(key: String, role: Hello.Role) async throws {
        try await TemporaryDirectory.with { directory in
            try await LoopbackServer.serve(directory: directory) { port, _ in
                await #expect(throws: FanoutError(.unauthenticated, "")) {
                    _ = try await LoopbackServer.connect(port, key: key, role: role)
                }
                // The raw view: one ERROR, then the server closes.
                let raw = try await RawConnection.open(port)
                let frames = try await raw.exchange([try RawConnection.hello(key: key, role: role)])
                #expect(frames.map(\.message.opcode) == [.error])
            }
        }
    }

    @Test func aServerThatIssuesNoCredentialsRefusesDeviceTokens() async throws {
        try await TemporaryDirectory.with { directory in
            try await LoopbackServer.serve(directory: directory) { port, _ in
                let hello = Hello(role: .consumer, credential: .installationAuthToken(Array("eyJhbGciOiJFUzI1NiJ9.e30.sig".utf8)))
                let raw = try await RawConnection.open(port)
                let frames = try await raw.exchange([try RawConnection.bytes(ClientFrame(requestID: 1, request: .hello(hello)))])
                guard case .error(let error) = frames.first?.message else {
                    Issue.record("expected an error, got \(frames)")
                    return
                }
                #expect(error.code == .unauthenticated)
                #expect(frames.count == 1)
            }
        }
    }

    @Test func aKeyForAnotherProjectIsDeniedAndTheConnectionSurvives() async throws {
        try await TemporaryDirectory.with { directory in
            try await LoopbackServer.serve(directory: directory) { port, _ in
                let shop = try await LoopbackServer.connect(port, key: LoopbackServer.shopAdminKey)
                #expect(shop.welcome.projects == ["shop-app"])
                try await shop.createProject("shop-app")
                await #expect(throws: FanoutError(.permissionDenied, "", field: "project")) {
                    _ = try await shop.installationCount(in: "default")
                }
                await #expect(throws: FanoutError(.permissionDenied, "", field: "project")) {
                    try await shop.createProject("news-app")
                }
                #expect(try await shop.installationCount(in: "shop-app") == 0)
                #expect(try await shop.listProjects() == ["shop-app"])
                try await shop.close()
            }
        }
    }

    @Test func aConsumerCallingAnAdminOpcodeIsDeniedAndTheConnectionSurvives() async throws {
        try await TemporaryDirectory.with { directory in
            try await LoopbackServer.serve(directory: directory) { port, _ in
                let consumer = try await LoopbackServer.connect(port, key: LoopbackServer.consumerKey, role: .consumer)
                await #expect(throws: FanoutError(.permissionDenied, "")) {
                    _ = try await consumer.send(#"{"message":{"topic":"news","data":{"a":"b"}}}"#)
                }
                await #expect(throws: FanoutError(.permissionDenied, "")) {
                    _ = try await consumer.subscribe(["token-1"], to: "news")
                }
                try await consumer.ping()
                await #expect(throws: FanoutError(.failedPrecondition, "")) {
                    try await consumer.acknowledge([DeliveryID(messageSequence: 1, slot: 0)])
                }
                _ = try await consumer.attach(.platform(.web), credit: 4)
                await #expect(throws: FanoutError(.failedPrecondition, "")) {
                    _ = try await consumer.attach(.platform(.web), credit: 4)
                }
                try await consumer.close()
            }
        }
    }

    /// SIGHUP's reload: a revoked key's connection answers what it applied, gets GOAWAY
    /// UNAUTHENTICATED and is closed; the others carry on; the revoked key cannot connect again,
    /// and a key added by the reload can.
    @Test func reloadingTheKeysClosesExactlyTheRevokedKeysConnections() async throws {
        try await TemporaryDirectory.with { directory in
            try await LoopbackServer.withServer(directory: directory) { server, _ in
                let port = server.localPort
                let admin = try await LoopbackServer.connect(port)
                let shop = try await LoopbackServer.connect(port, key: LoopbackServer.shopAdminKey)
                let raw = try await RawConnection.open(port)

                let senderSecret = "reloaded-sender-key-000001"
                var keys = LoopbackServer.keys
                let removed = keys.remove(named: "shop-admin")
                #expect(removed)
                try keys.add(APIKey(name: "sender", role: .sender, projects: .all, secret: Array(senderSecret.utf8)))

                // The raw view of a revoked connection: GOAWAY UNAUTHENTICATED, then the close.
                let frames = try await raw.channel.executeThenClose { inbound, outbound in
                    try await outbound.write(try RawConnection.hello(key: LoopbackServer.shopAdminKey))
                    var iterator = inbound.makeAsyncIterator()
                    var frames = try await RawConnection.frames(1, from: &iterator)
                    server.reloadKeys(keys)
                    while let frame = try? await iterator.next() { frames.append(frame) }
                    return frames
                }
                #expect(frames.map(\.message.opcode) == [Opcode.hello.reply, .goAway])
                #expect(frames.last?.message == .goAway(.unauthenticated, "the API key was revoked or changed"))
                await #expect(throws: (any Error).self) { _ = try await shop.listProjects() }

                #expect(try await admin.listProjects() == ["default"], "an unchanged key's connection carries on")
                await #expect(throws: FanoutError(.unauthenticated, "")) {
                    _ = try await LoopbackServer.connect(port, key: LoopbackServer.shopAdminKey)
                }
                let sender = try await LoopbackServer.connect(port, key: senderSecret, role: .sender)
                #expect(try await sender.installationCount(in: "default") == 0)
                await #expect(throws: FanoutError(.permissionDenied, "")) { try await sender.createProject("news") }
                try await sender.close()
                try await admin.close()
            }
        }
    }
}
