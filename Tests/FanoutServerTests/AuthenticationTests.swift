import FanoutClient
import FanoutCore
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

    @Test func installationAuthTokensAreNotSupportedYet() async throws {
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
}
