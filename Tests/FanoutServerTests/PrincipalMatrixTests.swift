import FanoutClient
import FanoutCore
import FanoutKeys
@testable import FanoutServer
import FanoutTestSupport
import FanoutWire
import Foundation
import NIOCore
import Testing

/// Every request opcode by every principal over real sockets (docs/security.md): the expected
/// status of each cell comes from `PermissionMatrixTests.table` and the scoping rules written out
/// here, and every opcode of `Permissions.requestOpcodes` is walked, so a new opcode cannot be
/// forgotten. The principals: admin, admin of another project, sender, consumer, an app's key, a
/// device (by its auth token), the same device by its refresh token, another installation's device,
/// a device of another project (UNAUTHENTICATED wherever it names this one), and the ones HELLO
/// refuses: a deleted installation's token, an expired one, forged ones, none at all.
@Suite("Permission matrix over the wire")
struct PrincipalMatrixTests {
    enum Principal: CaseIterable {
        case admin, otherProjectAdmin, sender, consumer, app, device, refresh, otherDevice, otherProjectDevice
    }

    enum Outcome: Equatable {
        case allowed, denied, unauthenticated
    }

    static let senderKey = "matrix-sender-key-0000001"

    /// What each cell must answer.
    static func expected(_ principal: Principal, _ opcode: Opcode, _ request: ClientRequest) -> Outcome {
        let letters = PermissionMatrixTests.table[opcode.rawValue] ?? ""
        switch principal {
        case .admin: return .allowed
        case .otherProjectAdmin:
            return request.project != nil || opcode == .snapshot || opcode == .rotateSigningKey ? .denied : .allowed
        case .sender: return letters.contains("s") ? .allowed : .denied
        case .consumer: return letters.contains("c") ? .allowed : .denied
        case .app: return letters.contains("p") ? .allowed : .denied
        case .device: return letters.contains("d") ? .allowed : .denied
        case .refresh: return letters.contains("r") ? .allowed : .denied
        case .otherDevice:
            // Another installation's device names this one: only what names no installation passes.
            return letters.contains("d") && [.ping, .jwks, .grant, .acknowledge, .detach].contains(opcode) ? .allowed : .denied
        case .otherProjectDevice:
            // Its token proves nothing in `default`: past the role's check, naming it is UNAUTHENTICATED.
            guard letters.contains("d") else { return .denied }
            return request.project == nil ? .allowed : .unauthenticated
        }
    }

    /// A request of each opcode about installation A (FID `fid`, bound to user alice) in `default`;
    /// the destructive ones come last, the installation's own deletion at the very end.
    static func requests(fid: String) -> [(Opcode, ClientRequest)] {
        let p = "default"
        let order = Permissions.requestOpcodes.filter { ![.hello, .signOut, .deleteProject, .deleteInstallation].contains($0) } + [.signOut, .deleteProject, .deleteInstallation]
        return order.map { opcode in
            let request: ClientRequest
            switch opcode {
            case .ping: request = .ping
            case .createProject: request = .createProject(project: "news-app")
            case .deleteProject: request = .deleteProject(project: p)
            case .listProjects: request = .listProjects
            case .snapshot: request = .snapshot
            case .jwks: request = .jwks
            case .rotateSigningKey: request = .rotateSigningKey
            case .register: request = .register(project: p, RegistrationFields(token: "new-token", platform: .web, appID: "1:1:web:a"), issuingCredentials: true)
            case .registerBatch: request = .registerBatch(project: p, [RegistrationFields(token: "new-token-2", platform: .web, appID: "1:1:web:a")])
            case .registerBatchFIDs: request = .registerBatchFIDs(project: p, [RegistrationFields(token: "new-token-3", platform: .web, appID: "1:1:web:a")])
            case .refreshToken: request = .refreshToken(project: p, registration: fid, token: "a-token-2")
            case .touch: request = .touch(project: p, registration: fid)
            case .getInstallation: request = .getInstallation(project: p, registration: fid)
            case .deleteInstallation: request = .deleteInstallation(project: p, fid: fid)
            case .staleInstallations: request = .staleInstallations(project: p, limit: 10)
            case .pruneExpired: request = .pruneExpired(project: p)
            case .installationCount: request = .installationCount(project: p)
            case .setAPNsToken: request = .setAPNsToken(project: p, registration: fid, apnsToken: nil)
            case .installationByAPNsToken: request = .installationByAPNsToken(project: p, apnsToken: String(repeating: "0a", count: 32))
            case .issueCredentials: request = .issueCredentials(project: p, registration: "b-token")
            case .generateAuthToken: request = .generateAuthToken(project: p, fid: fid)
            case .bindDevice: request = .bindDevice(project: p, registration: "b-token", user: "bob", anonymous: false)
            case .signOut: request = .signOut(project: p, user: "alice", registration: fid)
            case .linkUser: request = .linkUser(project: p, anonymous: "guest-1", permanent: "alice")
            case .getUser: request = .getUser(project: p, user: "alice")
            case .cleanUpAnonymousUsers: request = .cleanUpAnonymousUsers(project: p, dryRun: true)
            case .listUsers: request = .listUsers(project: p, startAfter: "", limit: 10)
            case .setAnonymousCleanUp: request = .setAnonymousCleanUp(project: p, enabled: false)
            case .setLegacyInstanceIDs: request = .setLegacyInstanceIDs(project: p, accepted: false)
            case .subscribe: request = .subscribe(project: p, topic: "news", registrations: [fid])
            case .unsubscribe: request = .unsubscribe(project: p, topic: "news", registrations: [fid])
            case .topicsOf: request = .topicsOf(project: p, registration: fid)
            case .listTopics: request = .listTopics(project: p, startAfter: "", limit: 10)
            case .subscriberCount: request = .subscriberCount(project: p, topic: "news")
            case .audience: request = .audience(project: p, .topic("news"))
            case .send: request = .send(project: p, body: Array(#"{"message":{"topic":"weather","data":{"k":"v"}}}"#.utf8))
            case .pending: request = .pending(project: p, registration: fid)
            case .expireDeliveries: request = .expireDeliveries(project: p)
            case .stats: request = .stats(project: p)
            case .attach: request = .attach(project: p, scope: .installations([fid]), credit: 10)
            case .attachGrouped: request = .attach(project: p, scope: .installations([fid]), credit: 10, grouped: true)
            case .grant: request = .grant(credit: 1)
            case .acknowledge: request = .acknowledge([])
            case .detach: request = .detach
            default: request = .ping
            }
            return (opcode, request)
        }
    }

    /// A server with installations A (alice's) and B in `default`, C in `shop-app`, each with
    /// credentials; `body` gets the port, A's FID and the credentials.
    static func withWorld<T>(_ body: (Int, String, [String: InstallationCredentials], InstallationTokens) async throws -> T) async throws -> T {
        try await TemporaryDirectory.with { directory in
            let tokens = try LoopbackServer.tokens(in: directory)
            return try await LoopbackServer.withServer(directory: directory + "/data", tokens: tokens) { server, engine in
                let port = server.localPort
                let admin = try await LoopbackServer.connect(port)
                try await admin.createProject("shop-app")
                var credentials: [String: InstallationCredentials] = [:]
                for (name, project) in [("a", "default"), ("b", "default"), ("c", "shop-app"), ("d", "default")] {
                    _ = try await admin.register(RegistrationFields(token: "\(name)-token", platform: .android, appID: "1:1:android:a"), in: project)
                    credentials[name] = try await admin.issueCredentials(for: "\(name)-token", in: project)
                }
                _ = try await admin.bindDevice("a-token", to: "alice")
                _ = try await admin.deleteInstallation(fid: try #require(credentials["d"]).fid)
                try await admin.close()
                return try await body(port, try #require(credentials["a"]).fid, credentials, tokens)
            }
        }
    }

    static func connect(_ principal: Principal, port: Int, credentials: [String: InstallationCredentials]) async throws -> FanoutClient {
        let device = { (credential: Hello.Credential) in
            try await FanoutClient.connect(host: "127.0.0.1", port: port, credential: credential, role: .device)
        }
        switch principal {
        case .admin: return try await LoopbackServer.connect(port)
        case .otherProjectAdmin: return try await LoopbackServer.connect(port, key: LoopbackServer.shopAdminKey)
        case .sender: return try await LoopbackServer.connect(port, key: LoopbackServer.adminKey, role: .sender)
        case .consumer: return try await LoopbackServer.connect(port, key: LoopbackServer.consumerKey, role: .consumer)
        case .app: return try await LoopbackServer.connect(port, key: LoopbackServer.appKey, role: .app)
        case .device: return try await device(.installationAuthToken(Array(credentials["a"]!.authToken.token.utf8)))
        case .refresh: return try await device(.installationRefreshToken(Array(credentials["a"]!.refreshToken.utf8)))
        case .otherDevice: return try await device(.installationAuthToken(Array(credentials["b"]!.authToken.token.utf8)))
        case .otherProjectDevice: return try await device(.installationAuthToken(Array(credentials["c"]!.authToken.token.utf8)))
        }
    }

    @Test(arguments: Principal.allCases)
    func everyOpcodeAnswersAsItsCellSays(principal: Principal) async throws {
        try await Self.withWorld { port, fid, credentials, _ in
            let client = try await Self.connect(principal, port: port, credentials: credentials)
            var cells = 0
            for (opcode, request) in Self.requests(fid: fid) {
                let outcome: Outcome
                do {
                    _ = try await client.request(request)
                    outcome = .allowed
                } catch let error as FanoutError {
                    switch error.code {
                    case .permissionDenied: outcome = .denied
                    case .unauthenticated:
                        outcome = .unauthenticated
                        #expect(error.field == "project" && !error.message.contains(credentials["c"]!.authToken.token), "\(principal) \(opcode): \(error)")
                    default: outcome = .allowed
                    }
                }
                #expect(outcome == Self.expected(principal, opcode, request), "\(principal) \(opcode) \(request.opcode)")
                cells += 1
            }
            #expect(cells == Permissions.requestOpcodes.count - 1, "every opcode but HELLO")
            try? await client.close()
        }
    }

    /// The credentials HELLO refuses: UNAUTHENTICATED, said without the token, and the connection closed.
    @Test func refusedCredentialsAreUnauthenticatedAtHello() async throws {
        try await Self.withWorld { port, fid, credentials, tokens in
            let a = try #require(credentials["a"])
            let parts = a.authToken.token.split(separator: ".").map(String.init)
            let header = try #require(Base64URL.decode(parts[0]))
            let claims = String(decoding: try #require(Base64URL.decode(parts[1])), as: UTF8.self)
            let other = try #require(credentials["b"]).fid
            let stranger = try InstallationTokens(keys: try SigningKeys.open(directory: FileManager.default.temporaryDirectory.path + "/matrix-\(UInt64.random(in: 0...UInt64.max))", now: 0))
                .issue(project: "default", appID: "1:1:android:a", fid: fid, credentialID: RefreshToken.credentialID(of: SHA256.hash(a.refreshToken.utf8)), now: SystemWallClock().now().millisecondsSinceEpoch / 1000).token
            let now = SystemWallClock().now().millisecondsSinceEpoch / 1000
            let expired = try tokens.issue(project: "default", appID: "1:1:android:a", fid: fid, credentialID: RefreshToken.credentialID(of: SHA256.hash(a.refreshToken.utf8)), now: now - tokens.lifetime - 5).token
            let refused: [(String, Hello.Credential)] = [
                ("deleted installation", .installationAuthToken(Array(try #require(credentials["d"]).authToken.token.utf8))),
                ("deleted installation's refresh token", .installationRefreshToken(Array(try #require(credentials["d"]).refreshToken.utf8))),
                ("expired", .installationAuthToken(Array(expired.utf8))),
                ("alg none", .installationAuthToken(Array((Base64URL.encode(Array(String(decoding: header, as: UTF8.self).replacingOccurrences(of: "ES256", with: "none").utf8)) + "." + parts[1] + "." + parts[2]).utf8))),
                ("another key", .installationAuthToken(Array(stranger.utf8))),
                ("an unknown kid", .installationAuthToken(Array((Base64URL.encode(Array(#"{"alg":"ES256","typ":"JWT","kid":"not-a-kid"}"#.utf8)) + "." + parts[1] + "." + parts[2]).utf8))),
                ("altered claims", .installationAuthToken(Array((parts[0] + "." + Base64URL.encode(Array(claims.replacingOccurrences(of: fid, with: other).utf8)) + "." + parts[2]).utf8))),
                ("a made-up refresh token", .installationRefreshToken(Array(("rt1.default.\(fid)." + Base64URL.encode([UInt8](repeating: 7, count: 32))).utf8))),
                ("an auth token as a refresh token", .installationRefreshToken(Array(a.authToken.token.utf8))),
                ("an API key as an auth token", .installationAuthToken(Array(LoopbackServer.adminKey.utf8))),
            ]
            for (what, credential) in refused {
                let raw = try await RawConnection.open(port)
                let frames = try await raw.exchange([try RawConnection.bytes(ClientFrame(requestID: 1, request: .hello(Hello(role: .device, credential: credential))))])
                #expect(frames.count == 1, "\(what)")
                guard case .error(let error)? = frames.first?.message else {
                    Issue.record("\(what): \(frames)")
                    continue
                }
                #expect(error.code == .unauthenticated, "\(what): \(error)")
                #expect(!error.message.contains(parts[2]) && !error.message.contains(a.refreshToken), "never the token")
            }
            // No credential at all: every opcode as the first frame is UNAUTHENTICATED.
            for (opcode, request) in Self.requests(fid: fid) {
                let raw = try await RawConnection.open(port)
                let frames = try await raw.exchange([try RawConnection.bytes(ClientFrame(requestID: 1, request: request))])
                guard case .error(let error)? = frames.first?.message else {
                    Issue.record("\(opcode): \(frames)")
                    continue
                }
                #expect(error.code == .unauthenticated, "\(opcode)")
            }
        }
    }
}
