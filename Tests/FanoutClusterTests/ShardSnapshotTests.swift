@testable import FanoutCluster
import FanoutCore
import FanoutTestSupport
import Foundation
import Testing

/// Snapshots in NATS and purged streams, against a real nats-server: an owner publishes its
/// snapshot and purges its stream; a new node, and a node whose directory the purge left behind,
/// start from the snapshot and end with the owner's state; a snapshot whose LSN falls inside a
/// batch is continued from the right record.
@Suite("Shard snapshots", .serialized)
struct ShardSnapshotTests {
    static func node(_ name: String, _ directory: String, _ stream: ShardStream, _ server: NATSServerProcess, snapshots: Bool = true) throws -> ShardNode {
        try ShardReplicationTests.shardNode(name, directory: directory, stream: stream, on: server, snapshots: snapshots)
    }

    static func store(_ jetStream: JetStream) throws -> ShardSnapshotStore {
        try ShardSnapshotStore(jetStream, layout: KeyValueBucket(jetStream, name: ClusterNode.layoutBucket), replicas: 1)
    }

    /// Every token's installation and topics, as `engine` holds them.
    static func state(of engine: Engine, tokens: [String]) throws -> [String: String] {
        var state: [String: String] = ["count": "\(try engine.installationCount())"]
        for token in tokens {
            let address = RegistrationAddress.token(RegistrationToken(token)!)
            state[token] = "\(try engine.installation(address)) \(try engine.topics(of: address))"
        }
        return state
    }

    @Test func aNewNodeAndANodeLeftBehindStartFromThePublishedSnapshot() async throws {
        try await NATSServer.with { server in
            let (jetStream, stream) = try ShardReplicationTests.stream(3, on: server)
            try await TemporaryDirectory.with { base in
                try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
                let a = try Self.node("node-a", "\(base)/a", stream, server)
                try a.step()
                guard let (owner, term) = a.owned else { throw FanoutError(.internal, "node-a did not take the free shard") }
                var tokens: [String] = []
                func register(_ prefix: String, _ count: Int) async throws {
                    for index in 0..<count {
                        tokens.append("\(prefix)-\(index)")
                        _ = try await owner.register(ShardReplicationTests.request(tokens.last!))
                    }
                    _ = try await owner.subscribe(tokens.suffix(count).map { .token(RegistrationToken($0)!) }, to: TopicName(prefix)!)
                }
                try await register("early", 30)

                // B follows, then stops (its directory stays as it was).
                let b = try Self.node("node-b", "\(base)/b", stream, server)
                try b.step(mayTake: false)
                try b.engine.close()

                try await register("middle", 20)
                let path = try owner.snapshot()
                let lsn = try #require(Engine.lsn(ofSnapshot: path))
                let store = try Self.store(jetStream)
                let published = try store.publish(shard: stream.shard, term: term, path: path, lsn: lsn)
                let size = try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int
                #expect(published.lsn == lsn && published.bytes == size)
                #expect(try store.publish(shard: stream.shard, term: term, path: path, lsn: lsn - 1) == published, "an older snapshot does not replace it")
                let first = try stream.purge(before: lsn, keeping: .max, on: jetStream)
                let state = try jetStream.state(of: stream.name)
                #expect(first > 2 && state.firstSequence == first, "the stream was purged up to the snapshot")
                try await register("late", 5)
                let expected = try Self.state(of: owner, tokens: tokens)

                // A new node's fresh directory starts from the snapshot, then the stream after it.
                let c = try Self.node("node-c", "\(base)/c", stream, server)
                try c.step(mayTake: false)
                #expect(c.engine.recovery?.snapshot?.lsn == lsn, "opened from the published snapshot")
                #expect(try Self.state(of: c.engine, tokens: tokens) == expected)

                // B's log ends before what the stream still holds: it starts again from the snapshot.
                let bAgain = try Self.node("node-b", "\(base)/b", stream, server)
                try bAgain.step(mayTake: false)
                #expect(bAgain.engine.recovery?.snapshot?.lsn == lsn)
                #expect(try Self.state(of: bAgain.engine, tokens: tokens) == expected)

                // Without the published snapshots, a node cannot start behind a purged stream.
                #expect(throws: FanoutError(.unavailable, "")) { try Self.node("node-d", "\(base)/d", stream, server, snapshots: false) }

                // A follower the stream is purged past before it reads on (a node the owner did not
                // count when it purged) starts again from the newer snapshot.
                let e = try Self.node("node-e", "\(base)/e", stream, server)
                try await register("after", 5)
                let newer = try owner.snapshot()
                let newerLSN = try #require(Engine.lsn(ofSnapshot: newer))
                try store.publish(shard: stream.shard, term: term, path: newer, lsn: newerLSN)
                _ = try stream.purge(before: newerLSN, keeping: .max, on: jetStream)
                try await register("last", 3)
                #expect(throws: FanoutError(.failedPrecondition, "")) { try e.step(mayTake: false) }
                try e.step(mayTake: false)
                #expect(e.engine.recovery?.snapshot?.lsn == newerLSN)
                #expect(try Self.state(of: e.engine, tokens: tokens) == Self.state(of: owner, tokens: tokens))

                for engine in [c.engine, bAgain.engine, e.engine] { try engine.close() }
                try a.release()
                try a.engine.close()
            }
        }
    }

    /// A snapshot goes to NATS and back a chunk at a time (512 KiB): files of two and a half
    /// chunks, exactly two, and none come back byte for byte in 3, 2 and 1 chunks; bytes that do
    /// not match their entry are refused and leave no file.
    @Test func aSnapshotTravelsInChunks() async throws {
        try await NATSServer.with { server in
            let jetStream = try JetStream(urls: server.url)
            let store = try Self.store(jetStream)
            try await TemporaryDirectory.with { base in
                try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
                var random = SeededRandomNumberGenerator(seed: 7)
                let chunk = ShardSnapshotStore.chunkSize
                for (shard, (size, chunks)) in [(chunk * 5 / 2, 3), (chunk * 2, 2), (0, 1)].enumerated() {
                    let bytes = (0..<size).map { _ in UInt8.random(in: 0...255, using: &random) }
                    let path = "\(base)/snapshot-\(shard)"
                    try Data(bytes).write(to: URL(fileURLWithPath: path))
                    let entry = try store.publish(shard: shard, term: "node-a.1", path: path, lsn: 10)
                    #expect(entry.chunks == chunks && entry.bytes == size, "\(size) bytes")
                    try store.download(entry, to: "\(base)/back-\(shard)")
                    #expect(try Data(contentsOf: URL(fileURLWithPath: "\(base)/back-\(shard)")) == Data(bytes), "\(size) bytes")
                }
                let first = try #require(try store.latest(of: 0))
                let wrong = ShardSnapshotStore.Entry(lsn: first.lsn, subject: first.subject, firstSequence: first.firstSequence, chunks: first.chunks, bytes: first.bytes, checksum: first.checksum ^ 1)
                #expect(throws: FanoutError(.internal, "")) { try store.download(wrong, to: "\(base)/wrong") }
                #expect(!FileManager.default.fileExists(atPath: "\(base)/wrong"))
            }
        }
    }

    /// A node reading the stream back while its owner purges it (a message it was about to read
    /// is gone) reads it again from the new first sequence; a read that fails with the stream
    /// unpurged is NATS's failure, thrown at once.
    @Test func aReadThatMeetsAPurgeIsMadeAgain() async throws {
        try await NATSServer.with { server in
            let (jetStream, stream) = try ShardReplicationTests.stream(6, on: server)
            let publisher = try ShardPublisher(jetStream, stream: stream, term: "node-a.1")
            for lsn in 1...4 { try publisher.publish([.createProject(ProjectID("project-\(lsn)")!)], through: UInt64(lsn)) }
            var calls = 0
            let first = try stream.readingWhilePurged(on: jetStream) { (state) throws(FanoutError) -> UInt64 in
                calls += 1
                if calls == 1 {
                    try jetStream.purge(stream.name, before: 3)
                    _ = try stream.batch(2, on: jetStream)  // purged meanwhile: UNAVAILABLE
                }
                return state.firstSequence
            }
            #expect(first == 3 && calls == 2)
            calls = 0
            #expect(throws: FanoutError(.unavailable, "")) {
                try stream.readingWhilePurged(on: jetStream) { (_) throws(FanoutError) in
                    calls += 1
                    throw FanoutError(.unavailable, "NATS does not answer")
                }
            }
            #expect(calls == 1)
        }
    }

    /// An owner's snapshot may end inside a batch it published (a group commit holding several
    /// changes): a follower seeded from it applies that batch's records from the snapshot's LSN
    /// on, once each.
    @Test func aSnapshotEndingInsideABatchIsContinuedFromItsLSN() async throws {
        try await NATSServer.with { server in
            let (jetStream, stream) = try ShardReplicationTests.stream(5, on: server)
            let publisher = try ShardPublisher(jetStream, stream: stream, term: "node-a.1")
            let tokens = (0..<6).map { "token-\($0)" }
            // The owner's records, published as two batches of three.
            let log = InMemoryChangeLog()
            let owner = Engine(log: log)
            for token in tokens { _ = try await owner.register(ShardReplicationTests.request(token)) }
            #expect(log.records.count == 6)
            try publisher.publish(Array(log.records[0..<3]), through: 3)
            try publisher.publish(Array(log.records[3..<6]), through: 6)

            try await TemporaryDirectory.with { base in
                try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
                // A directory whose log ends at LSN 4, inside the second batch, and its snapshot.
                let source = try Engine(directory: "\(base)/source")
                try source.applyReplicated(Array(log.records[0..<4]))
                let path = try source.snapshot()
                #expect(Engine.lsn(ofSnapshot: path) == 4)
                try source.close()
                try Engine.seed(directory: "\(base)/seeded", snapshot: path, lsn: 4)

                let engine = try Engine(directory: "\(base)/seeded")
                let follower = try ShardFollower(jetStream, stream: stream, resuming: engine)
                #expect(follower.appliedSequence == 2, "after the first batch: the second holds record 4")
                #expect(try follower.catchUp() == 2, "records 4 and 5 only")
                #expect(try Self.state(of: engine, tokens: tokens) == Self.state(of: owner, tokens: tokens))
                try engine.close()
            }
        }
    }
}
