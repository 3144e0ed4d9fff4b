@testable import FanoutCluster
import FanoutClient
import FanoutCore
import FanoutKeys
import FanoutServer
import FanoutTestSupport
import FanoutWire
import Foundation
import Logging
import Testing

/// Three cluster nodes in this process, each a `ClusterNode` with its `ClusterService` and a
/// `FanoutServer`, over one real nats-server: the same requests, sent round-robin to the three
/// nodes and to one plain fanoutd engine, get the same answers (FIDs the engines made up aside).
@Suite("Cluster routing", .serialized)
struct ClusterRoutingTests {
    static let key = "cluster-test-admin-key-01"
    static let keys = APIKeyStore([APIKey(name: "admin", role: .admin, projects: .all, secret: Array(key.utf8))])
    static let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    /// A reply as the comparison sees it: the FIDs and slots an engine made up are left out.
    static func normalized(_ message: ServerMessage) -> String {
        func installation(_ installation: Installation) -> String {
            "\(installation.token?.value ?? "-") \(installation.platform) \(installation.appID) \(installation.apnsToken.map { "\($0)" } ?? "-")"
        }
        func registered(_ result: RegistrationResult) -> String {
            "\(installation(result.installation)) existing=\(result.isExisting)"
        }
        switch message {
        case .installation(let opcode, let one): return "\(opcode) \(installation(one))"
        case .registered(let result): return "registered \(registered(result))"
        case .registeredBatch(let outcomes):
            return "batch " + outcomes.map { outcome in
                switch outcome {
                case .registered(let result): registered(result)
                case .failed(let error): "\(error.code) \(error.field ?? "-")"
                }
            }.joined(separator: "; ")
        case .registeredFIDs(let receipts):
            return "fids " + receipts.map { receipt in
                switch receipt {
                case .registered(_, let assigned, let existing): "assigned=\(assigned) existing=\(existing)"
                case .failed(let error): "\(error.code) \(error.field ?? "-")"
                }
            }.joined(separator: "; ")
        case .sent(let receipt): return "sent audience=\(receipt.audience) enqueued=\(receipt.enqueued) \(receipt.recipients)"
        case .pending(let deliveries): return "pending \(deliveries.count)"
        // Times are each side's own; a cluster lists a user's devices shard after shard.
        case .user(let opcode, let user):
            return "\(opcode) user \(user.id) anonymous=\(user.isAnonymous) \(user.devices.map(installation).sorted())"
        case .users(let users): return "users " + users.map { "\($0.id) anonymous=\($0.isAnonymous) devices=\($0.devices)" }.joined(separator: ", ")
        case .error(let error): return "error \(error.code) \(error.field ?? "-")"
        default: return "\(message)"
        }
    }

    /// Deliveries as workers record them, from several tasks: each id once, and how many came again.
    final class Tally: @unchecked Sendable {
        private let lock = NSLock()
        private var items: [DeliveryID: String] = [:]
        private var repeated = 0

        func add(_ more: [(DeliveryID, String)]) {
            self.lock.withLock {
                for (id, item) in more where self.items.updateValue(item, forKey: id) != nil { self.repeated += 1 }
            }
        }

        var all: [String] { self.lock.withLock { Array(self.items.values) } }
        var distinct: Int { self.lock.withLock { self.items.count } }
        var again: Int { self.lock.withLock { self.repeated } }
    }

    /// Listener settings for tests whose clients wait long between requests (a loaded machine):
    /// connections are not closed as idle or as handshakes that took too long.
    static var patientListener: ServerConfiguration {
        var configuration = ServerConfiguration(host: "127.0.0.1", port: 0, idleTimeout: .seconds(900))
        configuration.handshakeTimeout = .seconds(900)
        return configuration
    }

    /// Three nodes, node-a, node-b and node-c, of one cluster of 8 shards over `server`, each in
    /// its own directory under `directory`, with a 10 s lease (with 3 s, a machine loaded by the
    /// other tests let leases lapse in the middle of a test).
    static func threeNodes(on server: NATSServerProcess, in directory: String) throws -> [ClusterNode] {
        try ["node-a", "node-b", "node-c"].map { name in
            try ClusterNode(.init(urls: server.url, node: name, directory: "\(directory)/\(name)", shardCount: 8, lease: .seconds(10)))
        }
    }

    /// Sends each request to the next node and to the plain engine, and keeps the replies that differ.
    final class Comparison: @unchecked Sendable {
        let cluster: [FanoutClient]
        let single: FanoutClient
        private var turn = 0
        private(set) var mismatches: [String] = []
        /// Sends the cluster answered `UNAVAILABLE` and that were sent again: the shards that had
        /// queued their part queued it again (at least once).
        private(set) var sendsSentAgain = 0

        init(cluster: [FanoutClient], single: FanoutClient) {
            self.cluster = cluster
            self.single = single
        }

        /// The reply, an error reply included (`request` throws it).
        static func reply(_ client: FanoutClient, _ request: ClientRequest) async throws -> ServerMessage {
            do {
                return try await client.request(request)
            } catch let error as FanoutError {
                return .error(error)
            }
        }

        /// The node's reply. A request the cluster answers UNAVAILABLE (a shard between owners,
        /// when a loaded machine delays a renewal past its lease) is sent again, as a client does.
        func both(_ request: ClientRequest) async throws -> ServerMessage {
            var fromCluster = try await Self.reply(self.cluster[self.turn % self.cluster.count], request)
            for _ in 0..<40 {
                switch fromCluster {
                case .error(let error) where error.code == .unavailable: break
                // A subscription batch whose items could not all be looked up (sent again whole:
                // subscribing twice changes nothing).
                case .itemResults(_, let results) where results.contains(.failed(.unavailable)): break
                default: return try await self.compare(request, fromCluster)
                }
                try await Task.sleep(for: .milliseconds(250))
                if case .send = request { self.sendsSentAgain += 1 }
                fromCluster = try await Self.reply(self.cluster[self.turn % self.cluster.count], request)
                // An UNAVAILABLE rotation may have applied (its answer timed out): sent again, its
                // old token is retired; the rotation is then read back.
                if case .refreshToken(let project, _, let token) = request, case .error(let error) = fromCluster, error.code == .unregistered,
                    case .installation(_, let installation) = try await Self.reply(self.cluster[0], .getInstallation(project: project, registration: token))
                {
                    fromCluster = .installation(.refreshToken, installation)
                }
            }
            return try await self.compare(request, fromCluster)
        }

        /// Sends `request` to the plain engine and keeps the two replies if they differ.
        private func compare(_ request: ClientRequest, _ fromCluster: ServerMessage) async throws -> ServerMessage {
            self.turn += 1
            let fromOne = try await Self.reply(self.single, request)
            if ClusterRoutingTests.normalized(fromCluster) != ClusterRoutingTests.normalized(fromOne) {
                self.mismatches.append("\(request.opcode): cluster \(ClusterRoutingTests.normalized(fromCluster)) / one engine \(ClusterRoutingTests.normalized(fromOne))")
            }
            return fromCluster
        }
    }

    /// A node sweeps the shards it owns as one fanoutd sweeps its engine: a delivery whose TTL ran
    /// out is expired by the node (not only hidden from reads). A 10 s lease: with 3 s, a loaded
    /// machine let it lapse, and the engine the node made when it took the shard again had
    /// counted nothing (the delivery expired in the one before).
    @Test func aNodeSweepsTheShardsItOwns() async throws {
        try await NATSServer.with { server in
            try await TemporaryDirectory.with { directory in
                let node = try ClusterNode(.init(urls: server.url, node: "node-a", directory: directory, shardCount: 2, lease: .seconds(10)))
                let service = try ClusterService(node: node, expiryInterval: .milliseconds(50), logger: Self.quiet)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await service.run() }
                    defer { group.cancelAll() }
                    let owning = ContinuousClock.now + .seconds(60)
                    while ContinuousClock.now < owning, node.ownedShards != [0, 1] { try await Task.sleep(for: .milliseconds(50)) }
                    try #require(node.ownedShards == [0, 1])
                    let engine = node.served(1).engine
                    _ = try await engine.register(RegistrationRequest(token: RegistrationToken("token-1")!, platform: .android, appID: AppID("1:1:android:a")!))
                    _ = try await engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in
                        try changes.send(Array(#"{"message": {"token": "token-1", "android": {"ttl": "1s"}, "data": {"k": "v"}}}"#.utf8))
                    }.durable()
                    #expect(try engine.deliveryStatistics().pending == 1)
                    // The shard's engine as the node serves it now (a loaded machine may let the
                    // lease lapse, and the node take the shard again with a new engine).
                    func statistics() throws -> DeliveryStatistics { try node.served(1).engine.deliveryStatistics() }
                    let expiring = ContinuousClock.now + .seconds(60)
                    while ContinuousClock.now < expiring, try statistics().expired == 0 { try await Task.sleep(for: .milliseconds(50)) }
                    let swept = try statistics()
                    #expect(swept.expired == 1 && swept.pending == 0, "\(swept)")
                }
                node.close()
            }
        }
    }

    @Test func threeNodesAnswerAsOneEngineDoes() async throws {
        try await NATSServer.with { server in
            try await TemporaryDirectory.with { directory in
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
                let configuration = Self.patientListener
                let nodes = try Self.threeNodes(on: server, in: directory)
                // node-c's copies of the shards it does not own never catch up after the start (an
                // hour between catch-ups): what it routes by them, it routes as a node far behind.
                let services = try nodes.map { node in
                    try ClusterService(node: node, catchUpInterval: node.node == "node-c" ? .seconds(3600) : .milliseconds(100), logger: Self.quiet)
                }
                var servers: [FanoutServer] = []
                for service in services {
                    servers.append(try await FanoutServer.bind(cluster: service, keys: Self.keys, configuration: configuration, logger: Self.quiet))
                }
                let single = Engine()
                let reference = try await FanoutServer.bind(engine: single, keys: Self.keys, configuration: configuration, logger: Self.quiet)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for service in services { group.addTask { try await service.run() } }
                    for server in servers + [reference] { group.addTask { try await server.run() } }
                    defer { group.cancelAll() }

                    // Each node owns the shards placed on it.
                    let names = nodes.map(\.node)
                    func settled() -> Bool {
                        nodes.allSatisfy { node in (0..<8).allSatisfy { node.served($0).isOwner == (ShardPlacement.preferredOwner(of: $0, among: names) == node.node) } }
                    }
                    let deadline = ContinuousClock.now + .seconds(90)
                    while ContinuousClock.now < deadline, !settled() { try await Task.sleep(for: .milliseconds(100)) }
                    try #require(settled(), "the nodes own the shards placed on them")

                    var clients: [FanoutClient] = []
                    for server in servers { clients.append(try await FanoutClient.connect(host: "127.0.0.1", port: server.localPort, apiKey: Self.key)) }
                    let single = try await FanoutClient.connect(host: "127.0.0.1", port: reference.localPort, apiKey: Self.key)
                    let comparison = Comparison(cluster: clients, single: single)
                    @discardableResult
                    func both(_ request: ClientRequest) async throws -> ServerMessage { try await comparison.both(request) }

                    var random = SeededRandomNumberGenerator(seed: 22)
                    let offered = (0..<200).map { _ in FID.make(fromRandomBytes: (0..<17).map { _ in UInt8.random(in: 0...255, using: &random) }).string }
                    let platforms: [Platform] = [.android, .ios, .web]
                    func fields(_ index: Int) -> RegistrationFields {
                        let platform = platforms[index % 3]
                        let appID = platform == .ios ? "1:1:ios:a" : platform == .web ? "1:1:web:a" : "1:1:android:a"
                        return RegistrationFields(offeredFID: index % 4 == 0 ? offered[index % 200] : nil, token: "token-\(index)", platform: platform, appID: appID)
                    }
                    try await both(.createProject(project: "shop-app"))
                    try await both(.createProject(project: "shop-app"))  // ALREADY_EXISTS on every shard
                    #expect(try await clients[2].listProjects().contains("shop-app"))
                    for index in 0..<60 { try await both(.register(project: "default", fields(index))) }
                    try await both(.register(project: "default", fields(7)))  // a repeat: the same one
                    try await both(.registerBatch(project: "default", (60..<160).map(fields) + [fields(3), RegistrationFields(token: "", platform: .android, appID: "1:1:android:a")]))
                    try await both(.registerBatchFIDs(project: "default", (160..<220).map(fields) + [fields(61), fields(170), RegistrationFields(token: "token-5", platform: .web, appID: "1:1:web:a")]))
                    try await both(.register(project: "shop-app", fields(500)))
                    let topics = ["news", "sport", "weather"]
                    for topic in topics {
                        var members: [String] = []
                        for index in 0..<160 where Bool.random(using: &random) { members.append("token-\(index)") }
                        members += ["unknown-token", ""]
                        try await both(.subscribe(project: "default", topic: topic, registrations: RegistrationList(members)))
                    }
                    try await both(.unsubscribe(project: "default", topic: "news", registrations: RegistrationList((0..<40).map { "token-\($0)" })))
                    // Through node-c, whose copies know none of these tokens: each goes to its token's
                    // own shard first; those registered with an offered FID (every fourth) live on
                    // the FID's shard, are NOT_FOUND there, and are found and sent again.
                    let farBehind = (0..<48).map { "token-\($0)" } + ["unknown-token"]
                    let throughC = try await Comparison.reply(clients[2], .subscribe(project: "default", topic: "far-behind", registrations: RegistrationList(farBehind)))
                    let throughOne = try await Comparison.reply(single, .subscribe(project: "default", topic: "far-behind", registrations: RegistrationList(farBehind)))
                    #expect(throughC == throughOne && throughOne == .itemResults(.subscribe, Array(repeating: .ok, count: 48) + [.failed(.notFound)]))
                    try await both(.subscriberCount(project: "default", topic: "far-behind"))
                    // Users whose devices span shards.
                    for index in 0..<24 {
                        try await both(.bindDevice(project: "default", registration: "token-\(100 + index)", user: "user-\(index % 5)", anonymous: index % 5 == 4))
                    }
                    try await both(.bindDevice(project: "default", registration: "token-130", user: "user-4", anonymous: false))  // anonymous already
                    try await both(.bindDevice(project: "default", registration: "token-131", user: "user-0", anonymous: true))  // permanent already
                    // The kind of a user known only on another shard than the device's.
                    func home(_ index: Int) -> Int { nodes[0].map.shard(of: RegistrationToken("token-\(index)")!) }
                    let elsewhere = try #require((142..<160).first { $0 % 4 != 0 && home($0) != home(141) })
                    try await both(.bindDevice(project: "default", registration: "token-141", user: "solo", anonymous: true))
                    let kind = try await both(.bindDevice(project: "default", registration: "token-\(elsewhere)", user: "solo", anonymous: false))
                    #expect(kind == .error(FanoutError(.failedPrecondition, "", field: "user")))
                    try await both(.bindDevice(project: "default", registration: "token-132", user: "bad user", anonymous: false))
                    try await both(.bindDevice(project: "default", registration: "unknown-token", user: "user-0", anonymous: false))
                    for user in ["user-0", "user-4", "nobody"] { try await both(.getUser(project: "default", user: user)) }
                    try await both(.listUsers(project: "default", startAfter: "", limit: 3))
                    try await both(.listUsers(project: "default", startAfter: "user-2", limit: 10))
                    try await both(.signOut(project: "default", user: "user-1", registration: "token-101"))
                    try await both(.signOut(project: "default", user: "user-1", registration: "token-102"))  // user-2's device
                    try await both(.linkUser(project: "default", anonymous: "user-0", permanent: "user-9"))  // not anonymous
                    try await both(.linkUser(project: "default", anonymous: "user-4", permanent: "user-4"))
                    try await both(.bindDevice(project: "default", registration: "token-140", user: "anon-b", anonymous: true))
                    try await both(.linkUser(project: "default", anonymous: "user-4", permanent: "anon-b"))  // target anonymous
                    try await both(.linkUser(project: "default", anonymous: "user-4", permanent: "user-3"))
                    try await both(.linkUser(project: "default", anonymous: "user-4", permanent: "user-3"))  // gone now
                    try await both(.getUser(project: "default", user: "user-3"))
                    try await both(.listUsers(project: "default", startAfter: "", limit: 100))
                    try await both(.cleanUpAnonymousUsers(project: "default", dryRun: true))
                    try await both(.send(project: "default", body: Array(#"{"message": {"user": "user-3", "data": {"k": "v"}}}"#.utf8)))
                    for index in stride(from: 1, to: 160, by: 15) {
                        try await both(.refreshToken(project: "default", registration: "token-\(index)", token: "rotated-\(index)"))
                    }
                    for index in 0..<12 {
                        try await both(.getInstallation(project: "default", registration: "token-\(index)"))
                        try await both(.topicsOf(project: "default", registration: "rotated-\(index)"))
                    }
                    for _ in 0..<3 {
                        try await both(.installationCount(project: "default"))
                        try await both(.listTopics(project: "default", startAfter: "", limit: 10))
                        for topic in topics { try await both(.subscriberCount(project: "default", topic: topic)) }
                        try await both(.audience(project: "default", .condition("'news' in topics && !('sport' in topics)")))
                        try await both(.audience(project: "default", .condition("'weather' in topics || 'sport' in topics")))
                    }
                    try await both(.send(project: "default", body: Array(#"{"message": {"topic": "weather", "data": {"k": "v"}}}"#.utf8)))
                    try await both(.send(project: "default", body: Array(#"{"message": {"condition": "'news' in topics || 'sport' in topics", "notification": {"title": "t"}}}"#.utf8)))
                    let toToken = try await both(.send(project: "default", body: Array(#"{"message": {"token": "token-5", "data": {"k": "v"}}}"#.utf8)))
                    try await both(.send(project: "default", body: Array(#"{"message": {"token": "token-1", "data": {"k": "v"}}}"#.utf8)))  // rotated away
                    try await both(.pending(project: "default", registration: "token-5"))
                    try await both(.deleteInstallation(project: "default", fid: "cAECAwQFBgcICQoLDA0ODx"))
                    try await both(.installationCount(project: "default"))
                    #expect(comparison.mismatches.isEmpty, "\(comparison.mismatches.joined(separator: "\n"))")

                    // The message id of a send to one token names its delivery, and ids are unique across shards.
                    guard case .sent(let receipt) = toToken else { throw FanoutError(.internal, "no receipt") }
                    let pending = try await clients[1].pendingDeliveries(for: "token-5")
                    #expect(pending.contains { $0.id.messageSequence == receipt.sequence })
                    #expect(receipt.sequence % 8 == UInt64(nodes[0].map.shard(of: try #require(FID(try await clients[0].installation("token-5").fid.string)))))

                    // Consumers: a worker attached to each node receives the deliveries of the shards
                    // it owns, with a credit of 7 across them; together they get what one worker of the
                    // plain engine gets, and once acknowledged nothing is pending.
                    let androidTokens = stride(from: 0, to: 160, by: 3).map { index in
                        // Android's installations (index % 3 == 0), by their token now.
                        (index, index % 15 == 1 ? "rotated-\(index)" : "token-\(index)")
                    }
                    /// Whether nothing is pending for Android's installations; false while a read is
                    /// refused (a shard between owners on a loaded machine).
                    func nothingPending(_ client: (Int) -> FanoutClient) async throws -> Bool {
                        for (index, token) in androidTokens {
                            guard let pending = try? await client(index).pendingDeliveries(for: token), pending.isEmpty else { return false }
                        }
                        return true
                    }
                    /// What `streams` receive and acknowledge until `count` distinct deliveries came
                    /// in and nothing is pending (or 30 s passed): each delivery once, and how many
                    /// came again.
                    func received(
                        _ streams: [(FanoutClient, DeliveryStream)], expecting count: Int, drained: () async throws -> Bool
                    ) async throws -> (deliveries: [String], again: Int) {
                        let got = Tally()
                        let deadline = ContinuousClock.now + .seconds(30)
                        return try await withThrowingTaskGroup(of: Void.self) { group in
                            for (client, stream) in streams {
                                group.addTask {
                                    // Until the connection closes, which ends its wait for a delivery.
                                    while let batch = try? await stream.nextBatch(maximum: 7), !batch.isEmpty {
                                        _ = try? await client.acknowledge(batch.map(\.id))
                                        got.add(batch.map { ($0.id, "\($0.token?.value ?? "-") \(String(decoding: $0.payload, as: UTF8.self))") })
                                    }
                                }
                            }
                            while ContinuousClock.now < deadline {
                                if got.distinct >= count, try await drained() { break }
                                try await Task.sleep(for: .milliseconds(50))
                            }
                            for (client, _) in streams { try? await client.close() }
                            try await group.waitForAll()
                            return (got.all, got.again)
                        }
                    }
                    var androidPending = 0
                    for (_, token) in androidTokens { androidPending += try await single.pendingDeliveries(for: token).count }
                    let singleWorker = try await FanoutClient.connect(host: "127.0.0.1", port: reference.localPort, apiKey: Self.key)
                    let expected = try await received(
                        [(singleWorker, try await singleWorker.attach(.platform(.android), credit: 7))], expecting: androidPending, drained: { try await nothingPending { _ in single } })
                    #expect(expected.deliveries.count == androidPending && expected.again == 0)
                    var workers: [(FanoutClient, DeliveryStream)] = []
                    for server in servers {
                        let worker = try await FanoutClient.connect(host: "127.0.0.1", port: server.localPort, apiKey: Self.key)
                        workers.append((worker, try await worker.attach(.platform(.android), credit: 7)))
                    }
                    #expect(expected.deliveries.count > 20, "android deliveries: \(expected.deliveries.count)")
                    // The engines serving the shards: when a loaded machine delays a renewal past its
                    // lease, a shard changes hands (or engines), and what its old engine handed out
                    // unacknowledged comes again from the new one (at least once).
                    func owners() -> [ObjectIdentifier?] {
                        (0..<8).map { shard in nodes.lazy.map { $0.served(shard) }.first(where: \.isOwner).map { ObjectIdentifier($0.engine) } }
                    }
                    let ownersBefore = owners()
                    let fromCluster = try await received(workers, expecting: expected.deliveries.count, drained: { try await nothingPending { clients[$0 % 3] } })
                    if comparison.sendsSentAgain == 0 {
                        #expect(fromCluster.deliveries.sorted() == expected.deliveries.sorted())
                    } else {
                        #expect(Set(fromCluster.deliveries) == Set(expected.deliveries), "\(comparison.sendsSentAgain) sends sent again")
                    }
                    #expect(fromCluster.again == 0 || owners() != ownersBefore, "\(fromCluster.again) delivered again with no shard changing hands")
                    #expect(try await nothingPending { clients[$0 % 3] })
                    for (worker, _) in workers { try? await worker.close() }

                    // One worker attached to one node receives the deliveries of every shard, the
                    // other nodes' through their ShardConsumers; as one engine's worker does.
                    let sentAgainBefore = comparison.sendsSentAgain
                    try await both(.send(project: "default", body: Array(#"{"message": {"topic": "news", "data": {"round": "2"}}}"#.utf8)))
                    var secondPending = 0
                    for (_, token) in androidTokens { secondPending += try await single.pendingDeliveries(for: token).count }
                    let singleAgain = try await FanoutClient.connect(host: "127.0.0.1", port: reference.localPort, apiKey: Self.key)
                    let expectedAgain = try await received(
                        [(singleAgain, try await singleAgain.attach(.platform(.android), credit: 5))], expecting: secondPending, drained: { try await nothingPending { _ in single } })
                    #expect(expectedAgain.deliveries.count > 5 && expectedAgain.deliveries.count == secondPending)
                    let lone = try await FanoutClient.connect(host: "127.0.0.1", port: servers[2].localPort, apiKey: Self.key)
                    let ownersAgain = owners()
                    let fromOne = try await received([(lone, try await lone.attach(.platform(.android), credit: 5))], expecting: secondPending, drained: { try await nothingPending { clients[$0 % 3] } })
                    if comparison.sendsSentAgain == sentAgainBefore {
                        #expect(fromOne.deliveries.sorted() == expectedAgain.deliveries.sorted())
                    } else {
                        // Answered UNAVAILABLE and sent again: queued again on the shards that had it.
                        #expect(Set(fromOne.deliveries) == Set(expectedAgain.deliveries))
                    }
                    #expect(fromOne.again == 0 || owners() != ownersAgain, "\(fromOne.again) delivered again with no shard changing hands")
                    #expect(Set(nodes[2].ownedShards).count < 8, "node-c owns only its share: the rest came from the other nodes")

                    // A consumer of named installations, through a node that does not own their
                    // shard: their deliveries come from their owner, and a platform worker on the
                    // same node gets none of them.
                    let home = nodes[0].map.shard(of: try #require(FID(try await clients[0].installation("token-3").fid.string)))
                    let elsewhereNode = try #require((0..<3).first { !nodes[$0].ownedShards.contains(home) })
                    let device = try await FanoutClient.connect(host: "127.0.0.1", port: servers[elsewhereNode].localPort, apiKey: Self.key)
                    let watchdog = Task {
                        try await Task.sleep(for: .seconds(30))
                        try? await device.close()  // ends a wait that would never end
                    }
                    defer { watchdog.cancel() }
                    let deviceStream = try await device.attach(.installations(["token-3"]), credit: 10)
                    /// A send to token-3, sent again while the cluster answers UNAVAILABLE (as `both` does);
                    /// whether it was sent more than once.
                    func sendToDevice(_ text: String, through client: FanoutClient) async throws -> Bool {
                        for attempt in 0..<40 {
                            do {
                                _ = try await client.send(#"{"message": {"token": "token-3", "data": {"to": "\#(text)"}}}"#)
                                return attempt > 0
                            } catch let error as FanoutError where error.code == .unavailable {
                                try await Task.sleep(for: .milliseconds(250))
                            }
                        }
                        throw FanoutError(.unavailable, "no owner answered a send to token-3 for 10 s")
                    }
                    /// Takes and acknowledges the device's deliveries until one says `text`.
                    func deviceReceives(_ text: String) async throws -> Bool {
                        while true {
                            let batch = try await deviceStream.nextBatch(maximum: 10)
                            guard !batch.isEmpty else { return false }  // closed by the watchdog
                            _ = try? await device.acknowledge(batch.map(\.id))
                            if batch.contains(where: { String(decoding: $0.payload, as: UTF8.self).contains(text) }) { return true }
                        }
                    }
                    var sentTwice = try await sendToDevice("device-1", through: clients[1])
                    #expect(try await deviceReceives("device-1"))
                    let worker = try await FanoutClient.connect(host: "127.0.0.1", port: servers[elsewhereNode].localPort, apiKey: Self.key)
                    let workerStream = try await worker.attach(.platform(.android), credit: 10)
                    let workerGot = Tally()
                    let working = Task {
                        while let batch = try? await workerStream.nextBatch(maximum: 10), !batch.isEmpty {
                            workerGot.add(batch.map { ($0.id, "\($0.token?.value ?? "-")") })
                            _ = try? await worker.acknowledge(batch.map(\.id))
                        }
                    }
                    sentTwice = try await sendToDevice("device-2", through: clients[2]) || sentTwice
                    #expect(try await deviceReceives("device-2"))
                    try await worker.close()
                    await working.value
                    #expect(workerGot.distinct == 0, "the platform worker got the device's deliveries")
                    if !sentTwice { #expect(try await clients[0].pendingDeliveries(for: "token-3").isEmpty) }
                    try await device.close()

                    // SNAPSHOT through a node: a snapshot of each of its shards, the owners' published.
                    let files = try await clients[1].snapshotFiles()
                    #expect(files.count == 8 && files.enumerated().allSatisfy { $1.hasPrefix("shard-\($0)/snapshot-") && $1.hasSuffix(".lz4") }, "\(files)")
                    let published = try ShardSnapshotStore(nodes[1].jetStream, layout: KeyValueBucket(nodes[1].jetStream, existing: "fanout-cluster"), replicas: 1)
                    for shard in nodes[1].ownedShards {
                        let entry = try #require(try published.latest(of: shard))
                        let hex = String(entry.lsn, radix: 16)
                        #expect(files[shard] == "shard-\(shard)/snapshot-\(String(repeating: "0", count: 16 - hex.count) + hex).lz4", "shard \(shard): the one published")
                    }

                    // A consumer of a project no shard holds is refused at once (its parts on other
                    // nodes' shards would be attached later).
                    let stranger = try await FanoutClient.connect(host: "127.0.0.1", port: servers[2].localPort, apiKey: Self.key)
                    await #expect(throws: FanoutError(.notFound, "", field: "project")) { _ = try await stranger.attach(.platform(.ios), credit: 5, in: "no-such-project") }
                    try await stranger.close()

                    // Nodes started without signing keys issue no credentials (ClusterCredentialsTests: with).
                    #expect(try await Comparison.reply(clients[0], .issueCredentials(project: "default", registration: "token-3")) == .error(FanoutError(.failedPrecondition, "")))
                }
                try? single.close()
                for node in nodes { node.close() }
            }
        }
    }
}
