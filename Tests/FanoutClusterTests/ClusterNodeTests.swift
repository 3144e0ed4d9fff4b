@testable import FanoutCluster
import FanoutCore
import FanoutTestSupport
import Foundation
import Testing

/// Where shards go: rendezvous hashing spreads them evenly and moves only what a joining or
/// leaving node gains or held.
@Suite struct ShardPlacementTests {
    @Test func shardsSpreadEvenlyAndOnlyALeavingNodesShardsMove() {
        let nodes = ["node-a", "node-b", "node-c"]
        let owners = (0..<64).map { ShardPlacement.preferredOwner(of: $0, among: nodes)! }
        for node in nodes {
            // 21.3 expected; the spread of 64 draws over 3 bins is about 3.8.
            #expect((13...30).contains(owners.filter { $0 == node }.count), "\(node): \(owners.filter { $0 == node }.count)")
        }
        let without = (0..<64).map { ShardPlacement.preferredOwner(of: $0, among: ["node-c", "node-a"])! }
        for shard in 0..<64 where owners[shard] != "node-b" {
            #expect(without[shard] == owners[shard], "shard \(shard) moved though its owner stayed")
        }
        #expect(without.allSatisfy { $0 != "node-b" })
        #expect(ShardPlacement.preferredOwner(of: 3, among: []) == nil)
    }

    /// A shard's engine gives only FIDs of its shard, and gives a new one for an offered FID of
    /// another shard (as for a taken one); an offered FID of its own shard is kept.
    @Test func aShardsEngineGivesOnlyItsShardsFIDs() async throws {
        let map = ShardMap(count: 8)!
        var configuration = EngineConfiguration()
        configuration.acceptsFID = { map.shard(of: $0) == 5 }
        let engine = Engine(configuration: configuration)
        for index in 0..<40 {
            let fid = try await engine.register(ShardReplicationTests.request("token-\(index)")).installation.fid
            #expect(map.shard(of: fid) == 5)
        }
        var random = SeededRandomNumberGenerator(seed: 5)
        var offered: [Int: FID] = [:]
        while offered.count < 8 {
            let fid = FID.make(fromRandomBytes: (0..<17).map { _ in UInt8.random(in: 0...255, using: &random) })
            offered[map.shard(of: fid)] = fid
        }
        for (shard, fid) in offered {
            var request = ShardReplicationTests.request("offered-\(shard)")
            request.offeredFID = fid.string
            let given = try await engine.register(request).installation.fid
            #expect((given == fid) == (shard == 5), "shard \(shard)")
            #expect(map.shard(of: given) == 5)
        }
    }

    /// Message ids are unique across shards: each shard's engine gives the sequences of its class.
    @Test func aShardsEngineGivesMessageSequencesOfItsClass() async throws {
        var configuration = EngineConfiguration()
        configuration.messageSequences = MessageSequences(offset: 5, stride: 8)
        let engine = Engine(configuration: configuration)
        _ = try await engine.register(ShardReplicationTests.request("token-1"))
        var sequences: [UInt64] = []
        for _ in 0..<3 {
            sequences.append(try await engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in
                try changes.send(Array(#"{"message": {"token": "token-1", "data": {"a": "b"}}}"#.utf8)).sequence
            }.durable())
        }
        #expect(sequences == [5, 13, 21])
        #expect(MessageSequences(offset: 0, stride: 8).first(atLeast: 1) == 8 && MessageSequences(offset: 0, stride: 1).first(atLeast: 7) == 7)
    }

    @Test func nodeNamesAreChecked() {
        #expect(ClusterNode.isValidName("node-a_1"))
        #expect(!ClusterNode.isValidName("") && !ClusterNode.isValidName("node.a") && !ClusterNode.isValidName("node a"))
        #expect(!ClusterNode.isValidName(String(repeating: "n", count: 65)))
    }
}

/// Nodes of one cluster against a real nats-server, each on its own data directory, their turns
/// taken by the test: they split the shards as placed, a stopped node's shards are taken over with
/// their data, and it gets its share back when it returns.
@Suite("Cluster nodes", .serialized)
struct ClusterNodeTests {
    // fanoutd's default. A member whose turns come later than a lease apart (a loaded machine)
    // drops out of the members, and the others take its shards, as they should for a node that died.
    static let lease = Duration.seconds(3)

    /// A flag the turn threads read.
    final class Stop: @unchecked Sendable {
        private let lock = NSLock()
        private var isSet = false
        var requested: Bool { self.lock.withLock { self.isSet } }
        func request() { self.lock.withLock { self.isSet = true } }
    }

    /// Takes each node's turns on a thread of its own, a third of a lease apart, as fanoutd does,
    /// while `body` runs.
    static func whileTakingTurns<Result>(_ nodes: [ClusterNode], _ body: () async throws -> Result) async throws -> Result {
        let stop = Stop()
        let finished = DispatchGroup()
        for node in nodes {
            finished.enter()
            Thread.detachNewThread {
                while !stop.requested {
                    node.turn()  // what fails is tried again next turn, as in fanoutd's loop
                    Thread.sleep(forTimeInterval: Double((Self.lease / 3).components.seconds) + Double((Self.lease / 3).components.attoseconds) / 1e18)
                }
                finished.leave()
            }
        }
        defer {
            stop.request()
            finished.wait()
        }
        return try await body()
    }

    /// Takes each node's turns until `done` (checked every 100 ms) or 60 s.
    static func turns(_ nodes: [ClusterNode], until done: () throws -> Bool) async throws {
        try await Self.whileTakingTurns(nodes) {
            let deadline = ContinuousClock.now + .seconds(60)
            while ContinuousClock.now < deadline {
                if try done() { return }
                try await Task.sleep(for: .milliseconds(100))
            }
            Issue.record("the nodes did not get there within 60 s")
        }
    }

    /// Catches `nodes`' followers up until `done` (every 50 ms, 30 s at most): a catch-up applies
    /// what the streams delivered so far.
    static func catchUp(_ nodes: [ClusterNode], until done: () throws -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        repeat {
            for node in nodes { #expect(node.catchUp().isEmpty) }
            if try done() { return }
            try await Task.sleep(for: .milliseconds(50))
        } while ContinuousClock.now < deadline
        Issue.record("the followers did not get there within 30 s")
    }

    static func owned(by node: ClusterNode) -> Set<Int> {
        Set(node.servedShards.indices.filter { node.served($0).isOwner })
    }

    /// A node of the cluster at `server` (creating it with `shards`), on `directory/name`.
    static func join(_ name: String, shards: Int? = nil, server: NATSServerProcess, directory: String) throws -> ClusterNode {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return try ClusterNode(.init(urls: server.url, node: name, directory: "\(directory)/\(name)", shardCount: shards, lease: Self.lease))
    }

    static func preferred(_ node: String, among nodes: [String], shards: Int) -> Set<Int> {
        Set((0..<shards).filter { ShardPlacement.preferredOwner(of: $0, among: nodes) == node })
    }

    @Test func nodesSplitTheShardsAndTakeOverAStoppedNodesShardsWithTheirData() async throws {
        try await NATSServer.with { server in
            try await TemporaryDirectory.with { directory in
                func join(_ name: String, shards: Int? = nil) throws -> ClusterNode { try Self.join(name, shards: shards, server: server, directory: directory) }
                let a = try join("node-a", shards: 8)
                let b = try join("node-b")
                let c = try join("node-c", shards: 8)
                let names = ["node-a", "node-b", "node-c"]
                let all = [a, b, c]
                defer { all.forEach { $0.close() } }

                // Started together, each takes exactly its placed share.
                var strays: Set<Int> = []
                try await Self.turns(all) {
                    for node in all { strays.formUnion(Self.owned(by: node).subtracting(Self.preferred(node.node, among: names, shards: 8))) }
                    return all.allSatisfy { Self.owned(by: $0) == Self.preferred($0.node, among: names, shards: 8) }
                }
                #expect(strays.isEmpty, "shards taken by a node they are not placed on, then handed on")
                #expect(Self.owned(by: a).union(Self.owned(by: b)).union(Self.owned(by: c)) == Set(0..<8))

                // `fanout cluster status` reads the same from NATS: owners, and followers caught up.
                let status = try ClusterStatus.read(urls: server.url)
                #expect(status.shardCount == 8 && status.nodes == names)
                for shard in status.shards {
                    let owner = try #require(all.first { Self.owned(by: $0).contains(shard.shard) }).node
                    #expect(shard.owner == owner && shard.applied[owner] == .some(nil), "shard \(shard.shard)")
                    // The stream holds its creation marker; a follower reports how far it applied it.
                    for node in names where node != owner { #expect(shard.lag(of: node).map { $0 <= 1 } == true, "shard \(shard.shard), \(node)") }
                }
                #expect(status.isSettled && status.shards.allSatisfy { $0.placedOn == $0.owner })
                #expect(status.table.split(separator: "\n").count == 11)

                // A shard pinned by hand moves to its node, and back once unpinned.
                let moved = try #require(Self.owned(by: a).min())
                #expect(try ShardPins.pin(moved, to: "node-b", urls: server.url).nodes == [moved: "node-b"])
                #expect(try ClusterStatus.read(urls: server.url).shards[moved].placedOn == "node-b")
                try await Self.turns(all) { Self.owned(by: b).contains(moved) && !Self.owned(by: a).contains(moved) }
                let pinned = try ClusterStatus.read(urls: server.url)
                #expect(pinned.shards[moved].owner == "node-b" && pinned.shards[moved].pinnedTo == "node-b" && pinned.isSettled)
                #expect(pinned.table.contains("node-b (pinned to node-b)"))
                #expect(throws: FanoutError(.invalidArgument, "", field: "shard")) { try ShardPins.pin(8, to: "node-b", urls: server.url) }
                #expect(throws: FanoutError(.invalidArgument, "", field: "node")) { try ShardPins.pin(0, to: "no such node", urls: server.url) }
                #expect(try ShardPins.pin(moved, to: nil, urls: server.url).nodes.isEmpty)
                try await Self.turns(all) { Self.owned(by: a).contains(moved) }

                // A change on each of node-c's shards, answered by its owner's engine.
                var written: [Int: Installation] = [:]
                for shard in Self.owned(by: c) {
                    written[shard] = try await c.served(shard).engine.register(ShardReplicationTests.request("on-shard-\(shard)")).installation
                }
                #expect(!written.isEmpty)

                // node-c stops taking turns: its leases lapse and node-a and node-b take its shards,
                // with the changes it answered.
                try await Self.turns([a, b]) { Self.owned(by: a).union(Self.owned(by: b)) == Set(0..<8) }
                for (shard, installation) in written {
                    let owner = Self.owned(by: a).contains(shard) ? a : b
                    #expect(try owner.served(shard).engine.installation(.fid(installation.fid)) == installation)
                }

                // node-c returns: it learns it lost its shards, follows, and gets its share back.
                try await Self.turns(all) { all.allSatisfy { Self.owned(by: $0) == Self.preferred($0.node, among: names, shards: 8) } }
                for (shard, installation) in written {
                    #expect(try c.served(shard).engine.installation(.fid(installation.fid)) == installation)
                }
                // Followers hold the owners' changes too, once they caught up: a catch-up applies
                // what the streams delivered so far, so it is repeated until they hold them.
                func followersHoldEveryChange() -> Bool {
                    written.allSatisfy { shard, installation in (try? a.served(shard).engine.installation(.fid(installation.fid))) == installation }
                }
                try await Self.catchUp(all, until: followersHoldEveryChange)
                for (shard, installation) in written {
                    #expect(try a.served(shard).engine.installation(.fid(installation.fid)) == installation)
                    #expect(a.served(shard).appliedSequence != nil)
                }
            }
        }
    }

    /// Scheduled snapshots (`maintain()`): an owner publishes its shard's snapshot and purges the
    /// stream up to it, but not past what a member following the shard announced it applied; a
    /// follower's snapshot bounds its own log; a node that joins afterwards starts its shards from
    /// the published snapshots and ends with the owners' state.
    @Test func ownersPublishSnapshotsAndPurgeNoFurtherThanTheirFollowersApplied() async throws {
        try await NATSServer.with { server in
            try await TemporaryDirectory.with { directory in
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
                func join(_ name: String, shards: Int? = nil) throws -> ClusterNode {
                    var configuration = ClusterNode.Configuration(urls: server.url, node: name, directory: "\(directory)/\(name)", shardCount: shards, lease: Self.lease)
                    configuration.snapshotInterval = .zero  // due at every call
                    return try ClusterNode(configuration)
                }
                let a = try join("node-a", shards: 4)
                let b = try join("node-b")
                defer { [a, b].forEach { $0.close() } }
                let names = ["node-a", "node-b"]
                try await Self.whileTakingTurns([a, b]) {
                    try await Self.turns([]) { [a, b].allSatisfy { Self.owned(by: $0) == Self.preferred($0.node, among: names, shards: 4) } }
                    func owner(of shard: Int) -> ClusterNode { Self.owned(by: a).contains(shard) ? a : b }
                    func follower(of shard: Int) -> ClusterNode { Self.owned(by: a).contains(shard) ? b : a }
                    func register(_ prefix: String, on shards: some Sequence<Int>) async throws {
                        for shard in shards {
                            for index in 0..<10 {
                                _ = try await owner(of: shard).served(shard).engine.register(ShardReplicationTests.request("\(prefix)-\(shard)-\(index)"))
                            }
                        }
                    }
                    func count(_ node: ClusterNode, _ shard: Int) -> Int { (try? node.served(shard).engine.installationCount()) ?? -1 }
                    try await register("first", on: 0..<4)
                    try await Self.catchUp([a, b]) { (0..<4).allSatisfy { count(follower(of: $0), $0) == count(owner(of: $0), $0) } }

                    // The nodes announce (at their turns) that they applied everything; then node-b,
                    // which catches up no more, falls behind on node-a's shards.
                    try await Self.turns([]) { (try? ClusterStatus.read(urls: server.url))?.maximumLag == 0 }
                    let announced = try ClusterStatus.read(urls: server.url)
                    try await register("second", on: Self.owned(by: a))
                    #expect(a.maintain().isEmpty)
                    #expect(b.maintain().isEmpty)
                    let jetStream = try JetStream(urls: server.url)
                    let status = try ClusterStatus.read(urls: server.url)
                    for shard in 0..<4 {
                        let state = try jetStream.state(of: ShardStream(shard: shard).name)
                        let entry = try #require(try a.snapshots.latest(of: shard))
                        #expect(status.shards[shard].streamStart == state.firstSequence && status.shards[shard].snapshotLSN == entry.lsn)
                        let row = status.table.split(separator: "\n").map { $0.split(separator: " ") }.first { $0.first == "\(shard)" }
                        #expect(row?[2...4] == ["\(state.firstSequence)-\(state.lastSequence)", "LSN", "\(entry.lsn)"], "\(status.table)")
                        #expect(entry.lsn == owner(of: shard).served(shard).engine.loggedThrough, "shard \(shard): the owner's snapshot, of everything")
                        if owner(of: shard) === a {
                            let applied = try #require(announced.shards[shard].applied["node-b"] ?? nil)
                            #expect(state.firstSequence == applied + 1, "shard \(shard): purged up to what node-b still needs")
                        } else {
                            #expect(state.firstSequence == state.lastSequence, "shard \(shard): purged up to the snapshot (the last message stays)")
                        }
                        let files = try FileManager.default.contentsOfDirectory(atPath: "\(directory)/\(follower(of: shard).node)/shard-\(shard)")
                        #expect(files.contains { $0.hasPrefix("snapshot-") }, "shard \(shard): the follower's own snapshot")
                    }
                    // node-b reads on from where it was: the purge kept what it needs.
                    try await Self.catchUp([b]) { Self.owned(by: a).allSatisfy { count(b, $0) == count(a, $0) } }

                    // A node that joins now starts each shard from its snapshot.
                    let c = try join("node-c")
                    defer { c.close() }
                    for shard in 0..<4 {
                        #expect(c.served(shard).engine.recovery?.snapshot != nil, "shard \(shard): from the published snapshot")
                    }
                    try await Self.catchUp([c]) { (0..<4).allSatisfy { count(c, $0) == count(owner(of: $0), $0) } }
                    for shard in 0..<4 {
                        let token = RegistrationAddress.token(RegistrationToken("first-\(shard)-3")!)
                        #expect(try c.served(shard).engine.installation(token) == owner(of: shard).served(shard).engine.installation(token))
                    }
                }
            }
        }
    }

    /// The keys as a turn lists the members (`writtenKeys`, one request to the bucket's stream):
    /// those written, each once however often, as libnats' listing through a consumer has them;
    /// a key not written again drops out a TTL after its last write.
    @Test func writtenKeysAreTheEntriesThatHaveNotExpired() async throws {
        try await NATSServer.with { server in
            let jetStream = try JetStream(urls: server.url)
            let bucket = try KeyValueBucket(jetStream, name: "expiring", ttl: .seconds(1))
            #expect(try bucket.writtenKeys(timeout: .seconds(1)).isEmpty)
            try bucket.put("node-a", [1])
            try bucket.put("node-b", [2])
            try bucket.put("node-a", [3])
            #expect(try bucket.writtenKeys(timeout: .seconds(1)).sorted() == ["node-a", "node-b"])
            #expect(try bucket.keys().sorted() == ["node-a", "node-b"])
            // node-b written again and again, node-a no more: node-a expires.
            let deadline = ContinuousClock.now + .seconds(10)
            var keys: [String] = []
            repeat {
                try bucket.put("node-b", [4])
                try await Task.sleep(for: .milliseconds(100))
                keys = try bucket.writtenKeys(timeout: .seconds(1))
            } while keys != ["node-b"] && ContinuousClock.now < deadline
            #expect(keys == ["node-b"])
        }
    }

    /// The members cannot be listed (here: their bucket's stream is gone; in the field, a NATS
    /// server of the cluster lost, and listings time out for a while): the owners renew their
    /// leases all the same, turn after turn, and nobody takes or drops a shard.
    @Test func ownersKeepTheirLeasesWhileTheMembersCannotBeListed() async throws {
        try await NATSServer.with { server in
            try await TemporaryDirectory.with { directory in
                func join(_ name: String, shards: Int? = nil) throws -> ClusterNode { try Self.join(name, shards: shards, server: server, directory: directory) }
                let a = try join("node-a", shards: 4)
                let b = try join("node-b")
                defer { [a, b].forEach { $0.close() } }
                let names = ["node-a", "node-b"]
                try await Self.turns([a, b]) { [a, b].allSatisfy { Self.owned(by: $0) == Self.preferred($0.node, among: names, shards: 4) } }
                let owned = [a, b].map(Self.owned(by:))
                #expect(owned.allSatisfy { !$0.isEmpty })

                // The members as a turn reads them: one request to the bucket's stream.
                let jetStream = try JetStream(urls: server.url)
                let members = try KeyValueBucket(jetStream, existing: ClusterNode.membersBucket)
                #expect(Set(try members.writtenKeys(timeout: .seconds(1))) == Set(names))

                try jetStream.deleteStream("KV_\(ClusterNode.membersBucket)")
                let failures = a.turn()
                #expect(failures.membership.count == 2, "the listing and the announcement: \(failures.membership)")
                #expect(failures.shards.isEmpty, "\(failures.shards)")
                // Three leases of turns: every lease would have lapsed twice over had a turn not renewed it.
                let until = ContinuousClock.now + Self.lease * 3
                var lapsed: Set<String> = []
                try await Self.turns([a, b]) {
                    for (node, shards) in zip([a, b], owned) where Self.owned(by: node) != shards || !shards.allSatisfy({ node.served($0).holdsItsLease }) {
                        lapsed.insert(node.node)
                    }
                    return ContinuousClock.now >= until
                }
                #expect(lapsed.isEmpty, "owners whose shards lapsed or moved: \(lapsed.sorted())")
                #expect([a, b].map(Self.owned(by:)) == owned)
            }
        }
    }

    @Test func theShardCountIsTheClustersOwn() async throws {
        try await NATSServer.with { server in
            try await TemporaryDirectory.with { directory in
                let configuration = ClusterNode.Configuration(urls: server.url, node: "node-a", directory: directory, lease: Self.lease)
                #expect(throws: FanoutError(.failedPrecondition, "", field: "shards"), "no cluster yet, and no count to create one") {
                    try ClusterNode(configuration)
                }
                var creating = configuration
                creating.shardCount = 4
                try ClusterNode(creating).close()
                creating.shardCount = 5
                #expect(throws: FanoutError(.failedPrecondition, "", field: "shards")) { try ClusterNode(creating) }
                creating.shardCount = 0
                #expect(throws: FanoutError(.invalidArgument, "", field: "shards")) { try ClusterNode(creating) }
                var badName = configuration
                badName.node = "node.a"
                #expect(throws: FanoutError(.invalidArgument, "", field: "node")) { try ClusterNode(badName) }
                let joined = try ClusterNode(configuration)
                #expect(joined.map.count == 4)
                joined.close()
            }
        }
    }
}
