@testable import FanoutCluster
import FanoutClient
import FanoutCore
import FanoutKeys
import FanoutServer
import FanoutTestSupport
import FanoutWire
import Foundation
import Testing

/// Installation credentials on a cluster (docs/scale-out.md, "Installation credentials"): the
/// owner of an installation's shard issues them with its node's key; a device connects with them to
/// any node, acts on itself there and takes its deliveries; every node serves every node's keys.
@Suite("Cluster installation credentials", .serialized)
struct ClusterCredentialsTests {
    static let adminKey = "cluster-credentials-admin-01"
    static let appKey = "cluster-credentials-app-001"
    static let keys = APIKeyStore([
        APIKey(name: "admin", role: .admin, projects: .all, secret: Array(adminKey.utf8)),
        APIKey(name: "app", role: .app, projects: .all, secret: Array(appKey.utf8)),
    ])

    static func device(_ port: Int, _ credential: Hello.Credential) async throws -> FanoutClient {
        try await FanoutClient.connect(host: "127.0.0.1", port: port, credential: credential, role: .device)
    }

    /// The JWK Set's key ids.
    static func kids(_ jwks: String) throws -> Set<String> {
        let object = try #require(try JSONSerialization.jsonObject(with: Data(jwks.utf8)) as? [String: Any])
        let keys = try #require(object["keys"] as? [[String: Any]])
        return Set(keys.compactMap { $0["kid"] as? String })
    }

    /// A token signed with a key another node made after this node last read the bucket (it just
    /// joined, or rotated) is accepted at once: the unknown key id makes this node read the bucket
    /// again, rather than refuse the token until its next periodic read.
    @Test func aKeyAnotherNodeMadeAMomentAgoIsAcceptedAtOnce() async throws {
        try await NATSServer.with { server in
            try await TemporaryDirectory.with { directory in
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
                let nodes = try ClusterRoutingTests.threeNodes(on: server, in: directory)
                let now: Int64 = 1_700_000_000
                let keys = try nodes.prefix(2).map { node in
                    try ClusterSigningKeys(own: try SigningKeys.open(directory: "\(directory)/\(node.node)/signing-keys", now: now), node: node)
                }
                // node-a read the bucket before node-b published: it knows only its own key.
                let (token, _) = try keys[1].tokens(lifetime: 3600).issue(project: "default", appID: "1:1:android:a", fid: "cAECAwQFBgcICQoLDA0ODx", credentialID: "c1", now: now)
                let claims = try keys[0].tokens(lifetime: 3600).verify(Array(token.utf8), now: now + 1)
                #expect(claims.fid == "cAECAwQFBgcICQoLDA0ODx")
                // A key id nobody has is refused, and reads the bucket no more than once a second.
                let (forged, _) = try InstallationTokens(keys: try SigningKeys.open(directory: "\(directory)/stranger", now: now), lifetime: 3600)
                    .issue(project: "default", appID: "1:1:android:a", fid: "cAECAwQFBgcICQoLDA0ODx", credentialID: "c1", now: now)
                #expect(throws: CredentialError.self) { try keys[0].tokens(lifetime: 3600).verify(Array(forged.utf8), now: now + 1) }
                // node-b rotates: node-a accepts the new key's tokens at once too (a second later:
                // the reads for unknown keys are a second apart).
                try await Task.sleep(for: ClusterSigningKeys.lookupInterval)
                _ = try keys[1].rotate(now: now + 2, tokenLifetime: 3600)
                let (rotated, _) = try keys[1].tokens(lifetime: 3600).issue(project: "default", appID: "1:1:android:a", fid: "cAECAwQFBgcICQoLDA0ODx", credentialID: "c2", now: now + 2)
                #expect(try keys[0].tokens(lifetime: 3600).verify(Array(rotated.utf8), now: now + 3).credentialID == "c2")
                for node in nodes { node.close() }
            }
        }
    }

    @Test func aDeviceUsesItsCredentialsThroughAnyNode() async throws {
        try await NATSServer.with { server in
            try await TemporaryDirectory.with { directory in
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
                let configuration = ClusterRoutingTests.patientListener
                let nodes = try ClusterRoutingTests.threeNodes(on: server, in: directory)
                let signingKeys = try nodes.map { node in
                    try ClusterSigningKeys(own: try SigningKeys.open(directory: "\(directory)/\(node.node)/signing-keys", now: 1_700_000_000), node: node)
                }
                let services = try zip(nodes, signingKeys).map { node, keys in
                    try ClusterService(node: node, signingKeys: keys, logger: ClusterRoutingTests.quiet)
                }
                var servers: [FanoutServer] = []
                for service in services {
                    servers.append(try await FanoutServer.bind(cluster: service, keys: Self.keys, configuration: configuration, logger: ClusterRoutingTests.quiet))
                }
                let ports = servers.map(\.localPort)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for service in services { group.addTask { try await service.run() } }
                    for server in servers { group.addTask { try await server.run() } }
                    defer { group.cancelAll() }

                    // Every node serves the three nodes' keys, once each has read the others' (a turn).
                    var admins: [FanoutClient] = []
                    for port in ports { admins.append(try await FanoutClient.connect(host: "127.0.0.1", port: port, apiKey: Self.adminKey)) }
                    let ownKids = Set(signingKeys.map(\.own.current.id))
                    #expect(ownKids.count == 3, "each node has a key of its own")
                    let deadline = ContinuousClock.now + .seconds(90)
                    var served: [Set<String>] = []
                    repeat {
                        served = []
                        for admin in admins { served.append(try Self.kids(try await admin.jwks())) }
                        if served.allSatisfy({ $0 == ownKids }) { break }
                        try await Task.sleep(for: .milliseconds(100))
                    } while ContinuousClock.now < deadline
                    #expect(served.allSatisfy { $0 == ownKids }, "\(served) / \(ownKids)")

                    // An app registers an installation with its credentials through node-b; the
                    // same token again is refused (an app's key only creates), on any node.
                    let app = try await FanoutClient.connect(host: "127.0.0.1", port: ports[1], apiKey: Self.appKey, role: .app)
                    let fields = RegistrationFields(token: "phone-token-1", platform: .android, appID: "1:1:android:a")
                    let (registered, credentials) = try await app.registerWithCredentials(fields)
                    let fid = registered.installation.fid.description
                    do {
                        _ = try await app.registerWithCredentials(fields)
                        Issue.record("an app's key registered an installation that exists")
                    } catch let error as FanoutError {
                        #expect(error.code == .alreadyExists)
                    }

                    // The device connects with its auth token to every node (signed by its shard's
                    // owner), and acts on itself there, only on itself.
                    for port in ports {
                        let device = try await Self.device(port, .installationAuthToken(Array(credentials.authToken.token.utf8)))
                        #expect(try await device.installation(fid).fid.description == fid)
                        try await device.close()
                    }
                    #expect(try await admins[0].register(RegistrationFields(token: "other-token", platform: .web, appID: "1:1:web:a")).installation.token?.value == "other-token")
                    let onC = try await Self.device(ports[2], .installationAuthToken(Array(credentials.authToken.token.utf8)))
                    do {
                        _ = try await onC.installation("other-token")
                        Issue.record("a device read another installation")
                    } catch let error as FanoutError {
                        #expect(error.code == .permissionDenied)
                    }

                    // Its deliveries, sent through node-a, reach it through node-c.
                    let stream = try await onC.attach(.installations([fid]), credit: 10)
                    #expect(try await admins[0].send(#"{"message":{"token":"phone-token-1","data":{"n":"1"}}}"#).enqueued == 1)
                    let batch = try await stream.nextBatch(maximum: 10)
                    #expect(batch.count == 1 && String(decoding: batch.first?.payload ?? [], as: UTF8.self).contains(#""n":"1""#))
                    #expect(try await onC.acknowledge(batch.map(\.id)) == 1)
                    try await onC.close()

                    // With its refresh token, through node-a, it gets a new auth token, good on node-b.
                    let refreshing = try await Self.device(ports[0], .installationRefreshToken(Array(credentials.refreshToken.utf8)))
                    let renewed = try await refreshing.generateAuthToken(for: fid)
                    try await refreshing.close()
                    let onB = try await Self.device(ports[1], .installationAuthToken(Array(renewed.token.utf8)))
                    #expect(try await onB.installation(fid).fid.description == fid)
                    try await onB.close()

                    // New credentials issued through node-c replace the old ones on every node;
                    // node-b closes a device connection open under the old ones (after its next turn).
                    let watched = try await Self.device(ports[1], .installationAuthToken(Array(credentials.authToken.token.utf8)))
                    let watchedStream = try await watched.attach(.installations([fid]), credit: 10)
                    let replaced = try await admins[2].issueCredentials(for: fid)
                    let timedOut = Locked(false)
                    let watchdog = Task {
                        try await Task.sleep(for: .seconds(60))
                        timedOut.withLock { $0 = true }
                        try? await watched.close()
                    }
                    _ = try? await watchedStream.nextBatch(maximum: 10)  // ends when the connection does
                    watchdog.cancel()
                    #expect(!timedOut.withLock { $0 }, "the connection under replaced credentials was closed")
                    for port in ports {
                        await #expect(throws: FanoutError.self, "the old refresh token, on \(port)") {
                            let old = try await Self.device(port, .installationRefreshToken(Array(credentials.refreshToken.utf8)))
                            _ = try await old.generateAuthToken(for: fid)
                        }
                        let current = try await Self.device(port, .installationAuthToken(Array(replaced.authToken.token.utf8)))
                        #expect(try await current.installation(fid).fid.description == fid)
                        try await current.close()
                    }

                    // A rotation on node-a: its new key is served by every node after their turns.
                    let rotated = try await admins[0].rotateSigningKey()
                    let afterRotation = ContinuousClock.now + .seconds(90)
                    var withRotated: [Bool] = []
                    repeat {
                        withRotated = []
                        for admin in admins { withRotated.append(try Self.kids(try await admin.jwks()).contains(rotated)) }
                        if !withRotated.contains(false) { break }
                        try await Task.sleep(for: .milliseconds(100))
                    } while ContinuousClock.now < afterRotation
                    #expect(withRotated == [true, true, true])
                    for client in admins + [app] { try await client.close() }
                }
            }
        }
    }
}
