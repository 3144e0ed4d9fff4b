@testable import FanoutCluster
import FanoutCore
import FanoutTestSupport
import Foundation
import MetricsTestKit
import Synchronization
import Testing

/// A shard's change log through a real NATS JetStream server (Debian's nats-server, started per
/// test on a port it picks): an owner publishes what its engine logged, a follower applies the
/// stream, and ends with the owner's state; a batch published twice is stored once; a deposed
/// owner is refused.
@Suite("Shard replication through JetStream", .serialized)
struct ShardReplicationTests {
    /// The owner: an engine whose log is kept in memory, so that the test publishes what it logged
    /// batch by batch, as a replicated log will.
    final class Owner {
        let log = InMemoryChangeLog()
        let engine: Engine
        let publisher: ShardPublisher
        private var published = 0

        init(_ jetStream: JetStream, stream: ShardStream, clock: ManualClock) throws {
            self.engine = Engine(log: self.log, clock: clock)
            self.publisher = try ShardPublisher(jetStream, stream: stream, term: "owner.1")
        }

        /// Publishes the records logged since the last call, as one batch.
        func publish() throws {
            let records = self.log.records
            guard records.count > self.published else { return }
            try self.publisher.publish(Array(records[self.published...]), through: UInt64(records.count))
            self.published = records.count
        }
    }

    /// A connection to `server` and shard `shard`'s stream, created on it (one replica): its first
    /// message is the creation marker.
    static func stream(_ shard: Int, on server: NATSServerProcess) throws -> (JetStream, ShardStream) {
        let jetStream = try JetStream(urls: server.url)
        let stream = ShardStream(shard: shard)
        try stream.create(on: jetStream, replicas: 1)
        return (jetStream, stream)
    }

    /// Node `name`'s part in `stream` on `directory`, on a connection of its own to `server`, with
    /// a lease of `lease` and, with `snapshots`, the cluster's snapshot store.
    static func shardNode(
        _ name: String, directory: String, stream: ShardStream, on server: NATSServerProcess, lease: Duration = .seconds(1), snapshots: Bool = false,
        ownerMetrics: EngineMetrics = .none
    ) throws -> ShardNode {
        let jetStream = try JetStream(urls: server.url)
        let store = snapshots ? try ShardSnapshotTests.store(jetStream) : nil
        return try ShardNode(
            node: name, stream: stream, directory: directory, jetStream: jetStream, ownership: ShardOwnership(jetStream, lease: lease), snapshots: store,
            ownerMetrics: ownerMetrics
        )
    }

    /// Appends a batch of another node's to `stream`: its owner is deposed (its next append refused).
    static func depose(_ stream: ShardStream, on server: NATSServerProcess) throws {
        _ = try ShardPublisher(JetStream(urls: server.url), stream: stream, term: "node-z.99").publish([.createProject(ProjectID("elsewhere")!)], through: 1_000)
    }

    static func request(_ token: String) -> RegistrationRequest {
        RegistrationRequest(token: RegistrationToken(token)!, platform: .android, appID: AppID("1:1:android:a")!)
    }

    @Test func aFollowerAppliesTheOwnersStreamAndHoldsItsState() async throws {
        try await NATSServer.with { server in
            let (jetStream, stream) = try Self.stream(7, on: server)
            let clock = ManualClock()
            let owner = try Owner(jetStream, stream: stream, clock: clock)
            let follower = ShardFollower(try JetStream(urls: server.url), stream: stream, engine: Engine(clock: clock))

            // A seeded mix of what an owner does, published after every operation; the follower
            // catches up now and then, in the middle of it too.
            var random = SeededRandomNumberGenerator(seed: 22)
            let platforms: [Platform] = [.android, .ios, .web]
            let topics = (0..<8).map { TopicName("topic-\($0)")! }
            var tokens: [String] = []
            try await owner.engine.createProject(ProjectID("other-app")!)
            try owner.publish()
            for step in 0..<600 {
                switch Int.random(in: 0..<10, using: &random) {
                case 0..<4:
                    let token = "token-\(step)"
                    let platform = platforms.randomElement(using: &random)!
                    _ = try await owner.engine.register(RegistrationRequest(token: RegistrationToken(token)!, platform: platform, appID: AppID("1:1:\(platform):a")!))
                    tokens.append(token)
                case 4..<6 where !tokens.isEmpty:
                    let members = (0..<Int.random(in: 1...20, using: &random)).map { _ in RegistrationAddress.token(RegistrationToken(tokens.randomElement(using: &random)!)!) }
                    _ = try await owner.engine.subscribe(members, to: topics.randomElement(using: &random)!)
                case 6 where !tokens.isEmpty:
                    let index = Int.random(in: 0..<tokens.count, using: &random)
                    let renewed = "renewed-\(step)"
                    _ = try await owner.engine.refreshToken(.token(RegistrationToken(tokens[index])!), to: RegistrationToken(renewed)!)
                    tokens[index] = renewed
                case 7 where tokens.count > 10:
                    let token = tokens.remove(at: Int.random(in: 0..<tokens.count, using: &random))
                    let fid = try owner.engine.installation(.token(RegistrationToken(token)!)).fid
                    _ = try await owner.engine.deleteInstallation(fid)
                case 8:
                    let topic = topics.randomElement(using: &random)!
                    _ = try await owner.engine.send(Array(#"{"message":{"topic":"\#(topic)","data":{"step":"\#(step)"}}}"#.utf8))
                default:
                    guard let token = tokens.randomElement(using: &random) else { continue }
                    _ = try await owner.engine.send(Array(#"{"message":{"token":"\#(token)","notification":{"title":"\#(step)"}}}"#.utf8))
                }
                clock.advance(by: .seconds(1))
                try owner.publish()
                if step % 150 == 149 { try follower.catchUp() }
            }
            try follower.catchUp()
            #expect(try follower.catchUp() == 0, "nothing new: nothing applied twice")
            #expect(follower.appliedSequence == (try jetStream.state(of: stream.name).lastSequence))

            // The same state: projects, installations with their topics and pending deliveries,
            // topics with their subscribers, the delivery counters.
            let leader = owner.engine
            let copy = follower.engine
            #expect(copy.projectIDs() == leader.projectIDs())
            #expect(try copy.installationCount() == leader.installationCount())
            #expect(try copy.deliveryStatistics() == leader.deliveryStatistics())
            for topic in topics {
                #expect(try copy.subscriberCount(of: topic) == leader.subscriberCount(of: topic))
            }
            for token in tokens {
                let address = RegistrationAddress.token(RegistrationToken(token)!)
                #expect(try copy.installation(address) == leader.installation(address))
                #expect(try copy.topics(of: address) == leader.topics(of: address))
                let pending = try leader.pendingDeliveries(for: address)
                #expect(try copy.pendingDeliveries(for: address).map { [$0.id, $0.messageID, $0.payload] as [AnyHashable] } == pending.map { [$0.id, $0.messageID, $0.payload] as [AnyHashable] })
            }
            #expect(try leader.deliveryStatistics().pending > 0, "the comparison covered pending deliveries")
        }
    }

    /// The owner's engine on a `ReplicatedChangeLog` publishing to JetStream: every change it
    /// answers is in the stream already; with NATS killed, a change waits, and once NATS is back
    /// (same port, same store) it is answered and stored once.
    @Test func aChangeIsAnsweredOnlyOnceJetStreamHoldsIt() async throws {
        try await NATSServer.with { server in
            let (jetStream, stream) = try Self.stream(3, on: server)
            let publisher = try ShardPublisher(jetStream, stream: stream, term: "owner.1")
            let log = ReplicatedChangeLog(local: InMemoryChangeLog(), retryInterval: .milliseconds(50)) { records, through throws(FanoutError) in
                try publisher.publish(records, through: through)
            }
            let owner = Engine(log: log)
            let follower = ShardFollower(try JetStream(urls: server.url), stream: stream, engine: Engine())
            for index in 0..<50 {
                let installation = try await owner.register(Self.request("token-\(index)")).installation
                try follower.catchUp()
                #expect(try follower.engine.installation(.fid(installation.fid)) == installation, "answered, so in the stream")
            }

            server.kill()
            let applied = owner.apply { (changes: inout Engine.Changes) throws(FanoutError) in try changes.register(Self.request("during-the-outage")) }
            #expect(log.acknowledgedTicket.lsn == 50, "applied, not acknowledged: JetStream does not hold it")
            try await server.restart()
            let installation = try await applied.durable().installation
            try follower.catchUp()
            #expect(try follower.engine.installation(.fid(installation.fid)) == installation)
            #expect(try follower.engine.installationCount() == 51)
            #expect(try jetStream.state(of: stream.name).messages == 1 + 51, "the marker and 51 changes: published again after the outage, stored once")
            try owner.close()
        }
    }

    /// An owner on its data directory: what it logged and synced but never published (a crash
    /// between the two) is published when it starts again, before anything is acknowledged, so a
    /// follower ends with exactly the owner's state; a directory behind the stream, or a stream
    /// whose last batch is another node's, is refused.
    @Test func anOwnerPublishesTheTailItNeverPublishedWhenItStartsAgain() async throws {
        try await NATSServer.with { server in
            let (jetStream, stream) = try Self.stream(5, on: server)
            try await TemporaryDirectory.with { directory in
                // A first life as the owner: 20 registrations answered, so in the stream.
                let first = try Engine.shardOwner(directory: directory, publisher: ShardPublisher(jetStream, stream: stream, term: "node-a.1"))
                for index in 0..<20 { _ = try await first.register(Self.request("first-\(index)")) }
                try first.close()
                // Logged and synced, then a crash before the publish: the same log, no publisher.
                let local = try Engine(directory: directory)
                for index in 0..<5 { _ = try await local.register(Self.request("tail-\(index)")) }
                try local.close()
                let published = try jetStream.state(of: stream.name).lastSequence

                let owner = try Engine.shardOwner(directory: directory, publisher: ShardPublisher(jetStream, stream: stream, term: "node-a.2"))
                _ = try await owner.register(Self.request("after"))
                // The tail in one batch, then the new change (in the same batch when both were durable
                // before the replicating thread took the tail).
                #expect(try (published + 1...published + 2).contains(jetStream.state(of: stream.name).lastSequence))

                let follower = ShardFollower(try JetStream(urls: server.url), stream: stream, engine: Engine())
                try follower.catchUp()
                #expect(try follower.engine.installationCount() == 26)
                for token in (0..<5).map({ "tail-\($0)" }) + ["first-0", "first-19", "after"] {
                    let address = RegistrationAddress.token(RegistrationToken(token)!)
                    #expect(try follower.engine.installation(address) == owner.installation(address), "\(token)")
                }
                try owner.close()

                // A directory that lacks what the stream holds of this node's log.
                try await TemporaryDirectory.with { empty in
                    #expect(throws: FanoutError(.failedPrecondition, "")) {
                        try Engine.shardOwner(directory: empty, publisher: ShardPublisher(jetStream, stream: stream, term: "node-a.3"))
                    }
                }
                #expect(try ShardPublisher(jetStream, stream: stream, term: "node-b.4").lastBatch()?.term == "node-a.2")
            }
        }
    }

    /// A renewal whose answer never comes (the NATS server stopped: its connection stays up,
    /// nothing answers) gives up within its request wait, twice over at most (the write, and the
    /// read that tells a lost answer from a refusal), not JetStream's default 5 s each; and once
    /// NATS answers again, the owner still holds the shard, whether or not the lost write landed.
    @Test func aRenewalWithoutAnAnswerGivesUpWithinItsWait() async throws {
        try await NATSServer.with { server in
            let ownership = try ShardOwnership(try JetStream(urls: server.url), lease: .seconds(30), requestWait: .seconds(1))
            let lease = try #require(try ownership.take(3, for: "node-a"))
            let pid = try #require(server.pid)
            try NATSServer.stop(pid)
            let started = ContinuousClock.now
            var refusal: FanoutError?
            do throws(FanoutError) {
                _ = try ownership.renew(lease, for: "node-a")
            } catch {
                refusal = error
            }
            let waited = ContinuousClock.now - started
            kill(pid, SIGCONT)
            #expect(refusal?.code == .unavailable, "\(String(describing: refusal))")
            #expect(waited < .seconds(4), "gave up after \(waited)")
            let renewed = try #require(try ownership.renew(lease, for: "node-a"), "the owner's lease survives a lost answer")
            #expect(try ownership.owner(of: 3)?.node == "node-a")
            #expect(try ownership.take(3, for: "node-b") == nil)
            #expect(try ownership.renew(renewed, for: "node-a") != nil)
        }
    }

    /// Ownership in the key-value bucket: one owner per shard while it renews; once it stops, its
    /// lease lapses with the entry and another node takes the shard; the old owner's renewal then
    /// fails, so it knows to stop.
    @Test func aShardHasOneOwnerUntilItsLeaseLapses() async throws {
        try await NATSServer.with { server in
            // A lease long enough that a loaded machine (the whole suite on two cores) still renews in time
            // (CI saw a 1 s lease lapse between two renewals 200 ms apart).
            let ownership = try ShardOwnership(try JetStream(urls: server.url), lease: .seconds(4))
            var lease = try #require(try ownership.take(5, for: "node-a"))
            #expect(try ownership.take(5, for: "node-b") == nil)
            #expect(try ownership.owner(of: 5)?.node == "node-a")
            #expect(try ownership.take(6, for: "node-b") != nil, "another shard is free")

            // Renewed every 500 ms for more than a lease period: node-b never gets it.
            for _ in 0..<10 {
                try await Task.sleep(for: .milliseconds(500))
                lease = try #require(try ownership.renew(lease, for: "node-a"), "the owner renews")
                #expect(try ownership.take(5, for: "node-b") == nil)
            }
            // node-a stops renewing: node-b takes it once the entry expires.
            let deadline = ContinuousClock.now + .seconds(30)
            var taken: ShardOwnership.Lease?
            while taken == nil, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(100))
                // As a node's failover loop does: a call that fails (NATS slow under load) is tried again.
                taken = (try? ownership.take(5, for: "node-b")) ?? nil
            }
            #expect(taken != nil, "the lapsed lease was taken over")
            #expect(try ownership.owner(of: 5)?.node == "node-b")
            #expect(try ownership.renew(lease, for: "node-a") == nil, "the old owner learns it lost the shard")
            #expect(try ownership.owner(of: 5)?.node == "node-b")
        }
    }

    /// Failover: node A owns shard 9 and answers changes, node B follows. A stops (no more
    /// renewals); B takes the lapsed lease, catches up to the stream's end and becomes the owner:
    /// every change A answered is in B, B's own changes go on, A's late append is refused (its
    /// log fails), and a fresh follower sees A's answered changes and B's, once each.
    @Test func aFollowerTakesOverALapsedShardWithEveryAnsweredChange() async throws {
        try await NATSServer.with { server in
            let (jetStreamA, stream) = try Self.stream(9, on: server)
            let ownership = try ShardOwnership(jetStreamA, lease: .seconds(1))
            let leaseA = try #require(try ownership.take(9, for: "node-a"))
            let publisherA = try ShardPublisher(jetStreamA, stream: stream, term: "node-a.\(leaseA.revision)")
            let logA = ReplicatedChangeLog(local: InMemoryChangeLog()) { records, through throws(FanoutError) in try publisherA.publish(records, through: through) }
            let nodeA = Engine(log: logA)

            // Node B's engine logs through the publisher it gets when it takes over (none before:
            // a follower accepts no changes).
            let jetStreamB = try JetStream(urls: server.url)
            let publisherB = Mutex<ShardPublisher?>(nil)
            let logB = ReplicatedChangeLog(local: InMemoryChangeLog()) { records, through throws(FanoutError) in
                guard let publisher = publisherB.withLock({ $0 }) else { throw FanoutError(.failedPrecondition, "node-b does not own the shard") }
                try publisher.publish(records, through: through)
            }
            let nodeB = Engine(log: logB)
            let followerB = ShardFollower(jetStreamB, stream: stream, engine: nodeB)

            var answered: [Installation] = []
            for index in 0..<30 {
                answered.append(try await nodeA.register(Self.request("a-\(index)")).installation)
                if index == 10 { try followerB.catchUp() }
            }
            // A stops renewing. B takes the shard once the lease lapses, then catches up to the end.
            let deadline = ContinuousClock.now + .seconds(30)
            var leaseB: ShardOwnership.Lease?
            while leaseB == nil, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(100))
                leaseB = (try? ownership.take(9, for: "node-b")) ?? nil
            }
            let taken = try #require(leaseB, "node-b took the lapsed shard")
            try followerB.catchUp()
            let newPublisher = try ShardPublisher(jetStreamB, stream: stream, term: "node-b.\(taken.revision)")
            publisherB.withLock { $0 = newPublisher }
            for installation in answered {
                #expect(try nodeB.installation(.fid(installation.fid)) == installation, "every change A answered")
            }
            let byB = try await nodeB.register(Self.request("b-0")).installation

            // A, not knowing yet, appends: refused by JetStream, and A's log fails.
            let late = nodeA.apply { (changes: inout Engine.Changes) throws(FanoutError) in try changes.register(Self.request("a-late")) }
            #expect(throws: FanoutError(.unavailable, "")) { try late.blockingUntilDurable() }
            #expect(try ownership.renew(leaseA, for: "node-a") == nil, "A learns it lost the shard")

            let fresh = ShardFollower(jetStreamB, stream: stream, engine: Engine())
            try fresh.catchUp()
            #expect(try fresh.engine.installationCount() == 31)
            #expect(try fresh.engine.installation(.fid(byB.fid)) == byB)
            #expect(throws: FanoutError(.notFound, "", field: "registration")) { try fresh.engine.installation(.token(RegistrationToken("a-late")!)) }
            try nodeB.close()
        }
    }

    @Test func aBatchPublishedTwiceIsStoredOnceAndADeposedOwnerIsRefused() async throws {
        try await NATSServer.with { server in
            let (jetStream, stream) = try Self.stream(1, on: server)
            let first = try ShardPublisher(jetStream, stream: stream, term: "node-a.1")
            let batch: [WALRecord] = [.createProject(ProjectID("shard-app")!)]
            let sequence = try first.publish(batch, through: 1)
            // A retry of the same batch (same LSN, same message id): stored once.
            #expect(try first.publish(batch, through: 1) == sequence)
            #expect(try jetStream.state(of: stream.name).messages == 1 + 1, "the creation marker and the batch")

            // A second owner takes over and appends; the first, still expecting the old end, is refused.
            let second = try ShardPublisher(jetStream, stream: stream, term: "node-b.2")
            try second.publish([.setLegacyInstanceIDs(ProjectID("shard-app")!, accepted: true)], through: 2)
            #expect(throws: FanoutError(.failedPrecondition, "")) {
                try first.publish([.setLegacyInstanceIDs(ProjectID("shard-app")!, accepted: false)], through: 2_000)
            }
            #expect(try jetStream.state(of: stream.name).messages == 1 + 2)

            // What a follower applies is the second owner's history.
            let follower = ShardFollower(jetStream, stream: stream, engine: Engine())
            #expect(try follower.catchUp() == 2)
            #expect(try follower.engine.acceptsLegacyInstanceIDs(in: ProjectID("shard-app")!))

            // A message that is not a batch stops the follower with an error, and applies nothing.
            _ = try jetStream.publish(Array("not a batch".utf8), to: stream.subject, messageID: "junk", expectedLastSequence: 0)
            #expect(throws: FanoutError(.internal, "")) { try follower.catchUp() }
            #expect(follower.appliedSequence == 3)
        }
    }

    /// A follower on its own data directory logs what it applies, so it survives a restart: it
    /// opens its directory, resumes after the message its log ends at, and catches up to the
    /// owner's state; a log that reaches past the stream is refused.
    @Test func aFollowerOnItsDirectoryResumesWhereItsLogEnds() async throws {
        try await NATSServer.with { server in
            let (jetStream, stream) = try Self.stream(6, on: server)
            try await TemporaryDirectory.with { ownerDirectory in
                try await TemporaryDirectory.with { followerDirectory in
                    let owner = try Engine.shardOwner(directory: ownerDirectory, publisher: ShardPublisher(jetStream, stream: stream, term: "node-a.1"))
                    for index in 0..<30 { _ = try await owner.register(Self.request("early-\(index)")) }
                    _ = try await owner.subscribe((0..<10).map { .token(RegistrationToken("early-\($0)")!) }, to: TopicName("news")!)

                    var engine = try Engine(directory: followerDirectory)
                    var follower = try ShardFollower(jetStream, stream: stream, resuming: engine)
                    #expect(follower.appliedSequence == 1, "after the creation marker, which holds no record")
                    #expect(try follower.catchUp() == 31)
                    let caughtUpAt = follower.appliedSequence
                    try engine.close()

                    for index in 0..<10 { _ = try await owner.register(Self.request("late-\(index)")) }
                    engine = try Engine(directory: followerDirectory)
                    #expect(try engine.installationCount() == 30, "what it applied, from its own log")
                    follower = try ShardFollower(jetStream, stream: stream, resuming: engine)
                    #expect(follower.appliedSequence == caughtUpAt, "resumes after the message its log ends at")
                    #expect(try follower.catchUp() == 10)
                    #expect(try engine.installationCount() == owner.installationCount())
                    #expect(try engine.subscriberCount(of: TopicName("news")!) == 10)
                    for token in ["early-0", "early-29", "late-9"] {
                        let address = RegistrationAddress.token(RegistrationToken(token)!)
                        #expect(try engine.installation(address) == owner.installation(address), "\(token)")
                    }
                    try engine.close()
                    try owner.close()

                    // A log that reaches past every message of the stream does not follow it.
                    let stranger = try Engine(directory: ownerDirectory)
                    _ = try await stranger.register(Self.request("only-local"))
                    #expect(throws: FanoutError(.internal, "")) { try ShardFollower(jetStream, stream: stream, resuming: stranger) }
                    try stranger.close()
                }
            }
        }
    }

    /// Failover with data directories: a follower that logged what it applied takes the shard over
    /// (its log is the stream's, record for record); the deposed owner, whose log holds a change it
    /// never published, is refused when it comes back, although its log ends at the same LSN as
    /// the stream (the new owner published one change of its own meanwhile).
    @Test func aFollowerOnItsDirectoryTakesOverAndADeposedOwnersTailIsRefused() async throws {
        try await NATSServer.with { server in
            let (jetStream, stream) = try Self.stream(8, on: server)
            try await TemporaryDirectory.with { directoryA in
                try await TemporaryDirectory.with { directoryB in
                    let ownerA = try Engine.shardOwner(directory: directoryA, publisher: ShardPublisher(jetStream, stream: stream, term: "node-a.1"))
                    for index in 0..<5 { _ = try await ownerA.register(Self.request("a-\(index)")) }
                    try ownerA.close()
                    // A logs a change and never publishes it (a crash between the two), and is deposed.
                    let localA = try Engine(directory: directoryA)
                    _ = try await localA.register(Self.request("a-unpublished"))
                    try localA.close()

                    let followerEngine = try Engine(directory: directoryB)
                    try ShardFollower(jetStream, stream: stream, resuming: followerEngine).catchUp()
                    try followerEngine.close()
                    let ownerB = try Engine.shardOwner(directory: directoryB, publisher: ShardPublisher(jetStream, stream: stream, term: "node-b.2"))
                    #expect(try ownerB.installationCount() == 5)
                    _ = try await ownerB.register(Self.request("b-0"))
                    try ownerB.close()

                    #expect(throws: FanoutError(.failedPrecondition, "")) {
                        try Engine.shardOwner(directory: directoryA, publisher: ShardPublisher(jetStream, stream: stream, term: "node-a.3"))
                    }
                    // B starts again as the owner: its own batch is the last, nothing to publish.
                    let again = try Engine.shardOwner(directory: directoryB, publisher: ShardPublisher(jetStream, stream: stream, term: "node-b.4"))
                    #expect(try again.installationCount() == 6)
                    #expect(throws: FanoutError(.notFound, "", field: "registration")) { try again.installation(.token(RegistrationToken("a-unpublished")!)) }
                    try again.close()
                }
            }
        }
    }

    /// Two `ShardNode`s hand a shard over: A takes the free shard and answers changes while B
    /// follows on its directory; A stops (no more turns); B takes the lapsed lease with everything
    /// A answered, and fences the stream. A, still acting as the owner, logs a change JetStream then
    /// refuses, before B changed anything; at its next
    /// turn it learns it lost the shard and follows again: its directory, holding that change, is
    /// set aside, and a fresh one follows the stream to B's state.
    /// A shard's engine metrics count on the node that owns it, labelled with the shard: a
    /// follower applying the same changes counts nothing, and an owner that hands the shard on
    /// reads zero pending (so that a sum over the nodes counts each delivery once).
    @Test func anOwnersMetricsCountWhileItOwns() async throws {
        try await NATSServer.with { server in
            let (_, stream) = try Self.stream(4, on: server)
            try await TemporaryDirectory.with { directoryA in
                try await TemporaryDirectory.with { directoryB in
                    let (metricsA, metricsB) = (TestMetrics(), TestMetrics())
                    let shard = [("shard", "4")]
                    let a = try Self.shardNode("node-a", directory: directoryA, stream: stream, on: server, ownerMetrics: EngineMetrics(factory: metricsA, dimensions: shard))
                    let b = try Self.shardNode("node-b", directory: directoryB, stream: stream, on: server, ownerMetrics: EngineMetrics(factory: metricsB, dimensions: shard))
                    try a.step()
                    guard case .owning = a.role else { throw FanoutError(.internal, "node-a did not take the free shard") }
                    try await a.engine.register(Self.request("m-0"))
                    _ = try await a.engine.send(Array(#"{"message":{"token":"m-0","data":{"k":"v"}}}"#.utf8))
                    #expect(try metricsA.expectCounter("fanout_deliveries_queued_total", shard).totalValue == 1)
                    #expect(try metricsA.expectGauge("fanout_deliveries_pending", [("project", "default")] + shard).lastValue == 1)
                    try b.step()
                    #expect(try b.engine.deliveryStatistics().pending == 1, "the follower applied the send")
                    #expect(try metricsB.expectCounter("fanout_deliveries_queued_total", shard).totalValue == 0, "and counted nothing")

                    try a.release()
                    #expect(try metricsA.expectGauge("fanout_deliveries_pending", [("project", "default")] + shard).lastValue == 0)
                    try b.step()
                    guard case .owning = b.role else { throw FanoutError(.internal, "node-b did not take the released shard") }
                    _ = try await b.engine.send(Array(#"{"message":{"token":"m-0","data":{"k":"w"}}}"#.utf8))
                    #expect(try metricsB.expectGauge("fanout_deliveries_pending", [("project", "default")] + shard).lastValue == 2)
                    #expect(try metricsA.expectCounter("fanout_deliveries_queued_total", shard).totalValue == 1, "what A counted stays A's")
                    try a.engine.close()
                    try b.engine.close()
                }
            }
        }
    }

    @Test func twoShardNodesHandAShardOver() async throws {
        try await NATSServer.with { server in
            let (_, stream) = try Self.stream(4, on: server)
            try await TemporaryDirectory.with { directoryA in
                try await TemporaryDirectory.with { directoryB in
                    let a = try Self.shardNode("node-a", directory: directoryA, stream: stream, on: server)
                    let b = try Self.shardNode("node-b", directory: directoryB, stream: stream, on: server)
                    try a.step()
                    guard case .owning = a.role else { throw FanoutError(.internal, "node-a did not take the free shard") }
                    #expect(a.leaseExpiry.map { $0 > .now } == true, "A holds its lease")
                    try b.step()
                    guard case .following = b.role else { throw FanoutError(.internal, "node-b took a held shard") }
                    #expect(b.leaseExpiry == nil)
                    var answered: [Installation] = []
                    for index in 0..<20 { answered.append(try await a.engine.register(Self.request("a-\(index)")).installation) }
                    try b.step()

                    // A stops taking turns. B takes the shard once A's lease lapses.
                    let deadline = ContinuousClock.now + .seconds(30)
                    while ContinuousClock.now < deadline {
                        if case .owning = b.role { break }
                        try await Task.sleep(for: .milliseconds(100))
                        try? b.step()  // as the node's loop does: a turn that fails (NATS slow under load) is taken again
                    }
                    guard case .owning = b.role else { throw FanoutError(.internal, "node-b never took the lapsed shard") }
                    // A still acts as the owner, but knows its lease ran out (counted from before it
                    // asked, NATS counts from its write): it hands nothing out (`holdsItsLease`).
                    #expect(a.isOwner && a.leaseExpiry.map { $0 <= .now } == true, "A's lease ran out before B took the shard")
                    for installation in answered {
                        #expect(try b.engine.installation(.fid(installation.fid)) == installation, "every change A answered")
                    }

                    // A, not knowing yet, logs a change before B changed anything; JetStream refuses
                    // it: B fenced the stream when it took over (else A would answer a change B,
                    // which caught up before, never holds).
                    let late = a.engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in try changes.register(Self.request("a-late")) }
                    #expect(throws: FanoutError(.unavailable, "")) { try late.blockingUntilDurable() }
                    _ = try await b.engine.register(Self.request("b-0"))
                    try a.step()
                    guard case .following = a.role else { throw FanoutError(.internal, "node-a still owns the shard") }
                    #expect(a.leaseExpiry == nil)
                    #expect(a.setAside.count == 1, "the directory with the refused change was set aside")
                    try a.step()
                    #expect(try a.engine.installationCount() == 21)
                    #expect(throws: FanoutError(.notFound, "", field: "registration")) { try a.engine.installation(.token(RegistrationToken("a-late")!)) }
                    try a.engine.close()
                    try b.engine.close()
                    for aside in a.setAside { try? FileManager.default.removeItem(atPath: aside) }
                }
            }
        }
    }

    /// A directory that never held an owner's log is marked `FOLLOWER-ONLY` and not checked at
    /// start (the check reads the stream back to the node's last batch); taking the shard removes
    /// the mark before the owner's engine writes, and a directory that owned is checked again, and
    /// marked once it passes.
    @Test func onlyADirectoryThatOwnedIsCheckedAtStart() async throws {
        try await NATSServer.with { server in
            let (_, stream) = try Self.stream(11, on: server)
            try await TemporaryDirectory.with { base in
                try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
                func node(_ name: String) throws -> ShardNode { try Self.shardNode(name, directory: "\(base)/\(name)", stream: stream, on: server) }
                func isMarked(_ name: String) -> Bool { FileManager.default.fileExists(atPath: "\(base)/\(name)/FOLLOWER-ONLY") }
                let a = try node("node-a")
                #expect(isMarked("node-a"), "a fresh directory")
                try a.step()
                guard case .owning = a.role else { throw FanoutError(.internal, "node-a did not take the free shard") }
                #expect(!isMarked("node-a"), "an owner's directory")
                for index in 0..<10 { _ = try await a.engine.register(Self.request("a-\(index)")) }
                try a.release()
                #expect(isMarked("node-a"), "checked against the stream when it followed again, and passed")
                #expect(a.setAside.isEmpty)
                #expect(try a.engine.installationCount() == 10)
                try a.engine.close()

                // A deposed owner's directory, holding a change the stream refused, is unmarked: it
                // is checked at start and set aside, and the fresh one replacing it is marked.
                let b = try node("node-b")
                try b.step()
                guard case .owning = b.role else { throw FanoutError(.internal, "node-b did not take the released shard") }
                try Self.depose(stream, on: server)
                let refused = b.engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in try changes.register(Self.request("b-refused")) }
                #expect(throws: FanoutError(.unavailable, "")) { try refused.blockingUntilDurable() }
                #expect(throws: FanoutError(.unavailable, ""), "its replica lacks the refused change") { try b.engine.close() }
                let checked = try node("node-b")
                #expect(checked.setAside.count == 1, "checked at start: it holds a change the stream refused")
                #expect(isMarked("node-b"), "the fresh directory that replaced it")
                try checked.engine.close()
                for aside in checked.setAside { try? FileManager.default.removeItem(atPath: aside) }
            }
        }
    }

    /// An owner whose log fails for good while it still holds its lease (here deposed by another
    /// publisher, as a lapsed-lease owner's successor fences it) frees the shard at its next turn
    /// and follows again, instead of renewing a lease for a shard that refuses every change.
    @Test func anOwnerWhoseLogFailedHandsTheShardOn() async throws {
        try await NATSServer.with { server in
            let (_, stream) = try Self.stream(12, on: server)
            try await TemporaryDirectory.with { base in
                try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
                let a = try Self.shardNode("node-a", directory: "\(base)/a", stream: stream, on: server, lease: .seconds(30))
                try a.step()
                guard case .owning = a.role else { throw FanoutError(.internal, "node-a did not take the free shard") }
                _ = try await a.engine.register(Self.request("a-0"))
                try Self.depose(stream, on: server)
                let refused = a.engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in try changes.register(Self.request("a-refused")) }
                #expect(throws: FanoutError(.unavailable, "")) { try refused.blockingUntilDurable() }
                try a.step()
                #expect(!a.isOwner, "it let the shard go")
                #expect(try ShardOwnership(JetStream(urls: server.url), lease: .seconds(30)).owner(of: stream.shard) == nil, "at once, not a 30 s lease later")
                try a.engine.close()
                for aside in a.setAside { try? FileManager.default.removeItem(atPath: aside) }
            }
        }
    }

    /// NATS killed (SIGKILL) under an owner on its data directory: a change is applied and synced
    /// but not answered; closing the owner does not hang (it gives up on the replica after its
    /// wait) and the change's caller hears `UNAVAILABLE`; once NATS is back, the owner's next start
    /// publishes the change before anything else, and a follower has it, once.
    @Test func anOwnerClosedWhileNATSIsDownPublishesItsTailWhenItStartsAgain() async throws {
        try await NATSServer.with { server in
            let (jetStream, stream) = try Self.stream(10, on: server)
            try await TemporaryDirectory.with { directory in
                let owner = try Engine.shardOwner(
                    directory: directory, publisher: ShardPublisher(jetStream, stream: stream, term: "node-a.1"),
                    retryInterval: .milliseconds(20), closeWait: .milliseconds(300)
                )
                for index in 0..<10 { _ = try await owner.register(Self.request("before-\(index)")) }
                server.kill()
                let pending = owner.apply { (changes: inout Engine.Changes) throws(FanoutError) in try changes.register(Self.request("during-the-outage")) }
                #expect(throws: FanoutError(.unavailable, "")) { try owner.close() }
                #expect(throws: FanoutError(.unavailable, "")) { try pending.blockingUntilDurable() }

                try await server.restart()
                let again = try Engine.shardOwner(directory: directory, publisher: ShardPublisher(JetStream(urls: server.url), stream: stream, term: "node-a.2"))
                _ = try await again.register(Self.request("after"))
                let follower = ShardFollower(try JetStream(urls: server.url), stream: stream, engine: Engine())
                try follower.catchUp()
                #expect(try follower.engine.installationCount() == 12)
                let address = RegistrationAddress.token(RegistrationToken("during-the-outage")!)
                #expect(try follower.engine.installation(address) == again.installation(address))
                try again.close()
            }
        }
    }

    /// A shard's first change is fenced too: its stream starts with the creation marker, so two
    /// owners that both believe the fresh shard theirs cannot both append (libnats' expected last
    /// sequence of 0 would check nothing); a stream made without the marker is refused.
    @Test func aFreshShardsFirstChangeIsFenced() async throws {
        try await NATSServer.with { server in
            let (jetStream, stream) = try Self.stream(2, on: server)
            try stream.create(on: jetStream, replicas: 1)
            #expect(try jetStream.state(of: stream.name).messages == 1, "created twice, one marker")
            let old = try ShardPublisher(jetStream, stream: stream, term: "node-a.1")
            let new = try ShardPublisher(jetStream, stream: stream, term: "node-b.2")
            #expect(try old.lastBatch() == nil, "only the marker: nothing published")
            try new.publish([.createProject(ProjectID("fresh-app")!)], through: 1)
            #expect(throws: FanoutError(.failedPrecondition, "")) { try old.publish([.createProject(ProjectID("other-app")!)], through: 1) }
            let follower = ShardFollower(jetStream, stream: stream, engine: Engine())
            #expect(try follower.catchUp() == 1, "the marker applies as nothing")

            let bare = ShardStream(shard: 3)
            try jetStream.addStream(bare.name, subjects: [bare.subject], replicas: 1)
            #expect(throws: FanoutError(.failedPrecondition, "")) { try ShardPublisher(jetStream, stream: bare, term: "node-a.1") }
        }
    }
}

/// A nats-server (`NATSServerProcess`) in a temporary directory for one test: killed and removed
/// when `with`'s body returns.
enum NATSServer {
    /// Stops process `pid` (SIGSTOP) and returns once every one of its threads is stopped: the
    /// signal takes effect thread by thread, and a request sent meanwhile could still be answered
    /// (once in CI, a renewal sent at once was).
    static func stop(_ pid: Int32) throws {
        kill(pid, SIGSTOP)
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
            // A thread's state is the field after its name, which ends at the last ')'.
            let states = tasks.compactMap { task in
                (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/stat", encoding: .utf8))?
                    .split(separator: ")").last?.split(separator: " ").first
            }
            if !states.isEmpty, states.allSatisfy({ $0 == "T" || $0 == "t" }) { return }
            Thread.sleep(forTimeInterval: 0.001)
        }
        throw FanoutError(.internal, "nats-server \(pid) did not stop within 30 s of SIGSTOP")
    }

    static func with(_ body: (NATSServerProcess) async throws -> Void) async throws {
        guard let executable = NATSServerProcess.installedExecutable else {
            Issue.record("no nats-server: `make test` installs it (apt: nats-server)")
            return
        }
        let directory = TemporaryDirectory.path("nats")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let server = try NATSServerProcess(executable: executable, directory: directory)
        try await server.start()
        defer { server.kill() }
        try await body(server)
    }
}
