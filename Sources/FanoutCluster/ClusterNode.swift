package import CoreMetrics
package import FanoutCore
import FanoutModel
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One fanoutd node of a cluster (docs/scale-out.md): it takes part in every shard, following each
/// on its own data directory (`<directory>/shard-N`) and owning its share. The shard count is the
/// cluster's, fixed by the first node that created it; the members are the nodes that announced
/// themselves within the last lease; each shard's preferred owner is placed over the members by
/// `ShardPlacement`.
///
/// `turn()` is one round of the node's loop: call it every third of the lease, from a thread that
/// may block on NATS (fanoutd runs it on a thread of its own). In a turn, first every owner renews
/// its lease; then, for a third of a lease at most, roles change: a follower takes a free shard at
/// once when it is the shard's preferred owner (a dead owner's shards have a new preferred owner
/// once its membership expires), and any free shard that stayed free for three leases (its
/// preferred owner is alive but stuck), once it has itself been a member for a lease (so nodes
/// started together take only their own share); an owner hands one shard on to its preferred owner
/// once that node has been a member for a lease, so a node that joins gets its share back a shard a
/// turn, each free only between the release and the new owner's take. Last, the node announces
/// itself, with what it holds (`ClusterStatus`). `catchUp()`, on another thread between and during
/// turns, keeps the followers close behind their owners.
package final class ClusterNode: @unchecked Sendable {
    // Safe to share: `memberSince` and `freeSince` are touched only by `turn()`, which the caller
    // never runs twice at once, and `lastSnapshots` only by `maintain()`, likewise; a shard's
    // `ShardNode` only under its lock in `locks` (but for an owner's engine, which is thread-safe);
    // what other threads read is in `served`.

    /// A node's name: 1 to 64 characters of `A-Z a-z 0-9 _ -` (a key in NATS's key-value buckets,
    /// and part of each term it publishes under).
    package static func isValidName(_ name: String) -> Bool {
        (1...64).contains(name.utf8.count) && name.utf8.allSatisfy { ASCII.isAlphanumeric($0) || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") }
    }

    /// How a node joins its cluster.
    package struct Configuration: Sendable {
        /// The NATS servers, `nats://HOST:PORT`, comma-separated.
        package var urls: String
        /// This node's name, unique in the cluster.
        package var node: String
        /// Where the node keeps its shards' data directories.
        package var directory: String
        /// The shard count when this node creates the cluster; nil to join one that exists.
        package var shardCount: Int?
        /// How long an owner holds a shard without renewing, and a member counts as one without
        /// announcing itself.
        package var lease: Duration = .seconds(3)
        /// Copies of each stream and bucket: 1 on one NATS server, 3 on a three-server cluster.
        package var replicas: Int = 1
        /// How each shard's engine syncs its log, and its limits. Each shard's engine gives only
        /// FIDs of its shard and message sequences of its residue class (`acceptsFID` and
        /// `messageSequences` are set per shard).
        package var durability: Durability = .always
        package var engine = EngineConfiguration()
        /// How often each shard's engine writes a snapshot (`maintain()`), when it logged
        /// anything since; an owner's is published, and its stream purged up to it. Nil: never.
        package var snapshotInterval: Duration? = .seconds(600)
        /// Where the engines of the shards the node owns emit their metrics, each labelled with its
        /// `shard` (docs/operations.md); nil: nowhere. The copies it follows emit none.
        package var metricsFactory: (any MetricsFactory)?

        package init(urls: String, node: String, directory: String, shardCount: Int? = nil, lease: Duration = .seconds(3), replicas: Int = 1) {
            self.urls = urls
            self.node = node
            self.directory = directory
            self.shardCount = shardCount
            self.lease = lease
            self.replicas = replicas
        }
    }

    /// One shard as the node serves it now: the engine to read and, when `isOwner`, to change.
    package struct ServedShard: Sendable {
        package var engine: Engine
        package var isOwner: Bool
        /// The last stream sequence a follower applied; nil for the owner.
        package var appliedSequence: UInt64?
        /// When the owner's lease runs out at the latest unless renewed; nil for a follower.
        package var leaseExpiry: ContinuousClock.Instant? = nil

        /// Whether the node owns the shard and its lease, as last renewed, has not run out: an
        /// owner whose turns are late (a loaded machine) may have lost the shard to another node
        /// without knowing yet, and must not hand out deliveries the new owner hands out too.
        package var holdsItsLease: Bool {
            self.isOwner && self.leaseExpiry.map { ContinuousClock.now < $0 } == true
        }
    }

    /// The buckets: the cluster's layout (its shard count), and its members (each node's entry,
    /// holding what it says of its shards, expires a lease after its last turn).
    static let layoutBucket = "fanout-cluster"
    static let membersBucket = "fanout-nodes"

    /// How long a turn's requests to the ownership and members buckets wait for their answer: a
    /// third of the lease, 1 s at least. A renewal whose answer is lost (a NATS server gone
    /// mid-request) gives up within two of these (its write, and the read that tells a lost
    /// answer from a refusal), and the turn goes on to renew the node's other shards. With
    /// JetStream's default 5 s, one lost answer held the turn past a 3 s lease, and every shard
    /// the node owned lapsed.
    static func requestWait(lease: Duration) -> Duration {
        max(lease / 3, .seconds(1))
    }

    package let node: String
    package let map: ShardMap
    package let lease: Duration
    /// The node's NATS connection (routing between nodes uses it too).
    package let jetStream: JetStream
    /// Copies of each stream and bucket the cluster keeps.
    package let replicas: Int
    private let ownership: ShardOwnership
    private let members: KeyValueBucket
    private let layout: KeyValueBucket
    /// Where owners publish their snapshots, and followers behind a purged stream start from.
    package let snapshots: ShardSnapshotStore
    private let snapshotInterval: Duration?
    /// Per shard, when its engine last wrote a snapshot (or the node started) and the LSN its log
    /// reached then; touched only by `maintain()`.
    private var lastSnapshots: [(at: ContinuousClock.Instant, lsn: UInt64?)]
    /// The pins as last read (kept when a read fails, so a slow NATS moves no shard).
    private var pins = ShardPins()
    private let shards: [ShardNode]
    private let served: Mutex<[ServedShard]>
    /// Held while a shard is stepped: by a turn, or by catching up.
    private let locks: [Locked<Void>]
    private var memberSince: [String: ContinuousClock.Instant] = [:]
    private var freeSince: [Int: ContinuousClock.Instant] = [:]

    /// Joins the cluster at `configuration.urls` (creating it when `shardCount` is given and it
    /// does not exist yet) and opens a follower on each shard's directory. The node owns nothing
    /// until its turns take shards.
    /// - Throws: `INVALID_ARGUMENT` for a bad node name or shard count; `FAILED_PRECONDITION`
    ///   when the cluster exists with another shard count, or when none exists and no shard count
    ///   was given; `UNAVAILABLE` when NATS does not answer; what opening an engine throws.
    package init(_ configuration: Configuration) throws(FanoutError) {
        guard Self.isValidName(configuration.node) else {
            throw FanoutError(.invalidArgument, "a node's name is 1 to 64 characters of A-Z, a-z, 0-9, _ and -", field: "node")
        }
        guard mkdir(configuration.directory, 0o700) == 0 || errno == EEXIST else {
            throw FanoutError(.unavailable, "cannot make the node's data directory \(configuration.directory): errno \(errno)")
        }
        let jetStream = try JetStream(urls: configuration.urls)
        let requestWait = Self.requestWait(lease: configuration.lease)
        // Moments after the NATS servers start, JetStream answers only once they have elected
        // their leaders: the buckets and streams are made (or found) within 30 s.
        let (map, ownership, members, layout, snapshots) = try JetStream.retrying(for: .seconds(30)) { () throws(FanoutError) in
            let layout = try KeyValueBucket(jetStream, name: Self.layoutBucket, replicas: configuration.replicas)
            return (
                try Self.shardMap(in: layout, creating: configuration.shardCount),
                try ShardOwnership(jetStream, lease: configuration.lease, replicas: configuration.replicas, requestWait: requestWait),
                try KeyValueBucket(jetStream, name: Self.membersBucket, ttl: configuration.lease, replicas: configuration.replicas, requestWait: requestWait),
                layout,
                try ShardSnapshotStore(jetStream, layout: layout, replicas: configuration.replicas)
            )
        }
        var shards: [ShardNode] = []
        for shard in 0..<map.count {
            let stream = ShardStream(shard: shard)
            try stream.create(on: jetStream, replicas: configuration.replicas)
            let directory = "\(configuration.directory)/shard-\(shard)"
            var engine = configuration.engine
            engine.acceptsFID = { map.shard(of: $0) == shard }
            engine.messageSequences = map.messageSequences(ofShard: shard)
            // A shard that cannot start for now (NATS slow, its snapshot being replaced) is tried
            // again for 30 s before the node gives up.
            shards.append(try JetStream.retrying(for: .seconds(30)) { () throws(FanoutError) in
                try ShardNode(
                    node: configuration.node, stream: stream, directory: directory, durability: configuration.durability, configuration: engine,
                    jetStream: jetStream, ownership: ownership, snapshots: snapshots,
                    ownerMetrics: configuration.metricsFactory.map { EngineMetrics(factory: $0, dimensions: [("shard", "\(shard)")]) } ?? .none
                )
            })
        }
        self.node = configuration.node
        self.map = map
        self.lease = configuration.lease
        self.jetStream = jetStream
        self.replicas = configuration.replicas
        self.ownership = ownership
        self.members = members
        self.layout = layout
        self.snapshots = snapshots
        self.snapshotInterval = configuration.snapshotInterval
        self.lastSnapshots = shards.map { _ in (ContinuousClock.now, nil) }
        self.shards = shards
        self.locks = shards.map { _ in Locked(()) }
        self.served = Mutex(shards.map { ServedShard(engine: $0.engine, isOwner: false, appliedSequence: $0.appliedSequence) })
    }

    /// The cluster's shard map: the count stored in the layout bucket, written by the node that
    /// created the cluster.
    private static func shardMap(in layout: KeyValueBucket, creating count: Int?) throws(FanoutError) -> ShardMap {
        if let count {
            guard ShardMap(count: count) != nil else {
                throw FanoutError(.invalidArgument, "a cluster has 1 to 4096 shards, not \(count)", field: "shards")
            }
            _ = try layout.create("shards", Array(String(count).utf8))
        }
        guard let entry = try layout.entry("shards") else {
            if count != nil {
                // Created (here or by a node started with it) but not yet readable: a replicated
                // bucket's read may come from a replica a moment behind. `init` asks again.
                throw FanoutError(.unavailable, "the cluster's layout is not readable yet")
            }
            throw FanoutError(.failedPrecondition, "no cluster exists at these NATS servers: the first node creates it with a shard count", field: "shards")
        }
        let stored = String(decoding: entry.value, as: UTF8.self)
        guard let map = Int(stored).flatMap(ShardMap.init(count:)) else {
            throw FanoutError(.internal, "the cluster's layout names \(stored.count) characters as its shard count, not a number from 1 to 4096")
        }
        if let count, count != map.count {
            throw FanoutError(.failedPrecondition, "the cluster exists with \(map.count) shards, not \(count)", field: "shards")
        }
        return map
    }

    /// Shard `shard` as this node serves it now.
    package func served(_ shard: Int) -> ServedShard {
        self.served.withLock { $0[shard] }
    }

    /// Every shard as this node serves it now, by shard number.
    package var servedShards: [ServedShard] {
        self.served.withLock { $0 }
    }

    /// The shards this node owns now.
    package var ownedShards: Set<Int> {
        self.served.withLock { served in Set(served.indices.filter { served[$0].isOwner }) }
    }

    /// What a turn could not do; it goes on past each.
    package struct TurnFailures: Sendable {
        /// The shards whose step failed, with why (tried again next turn).
        package var shards: [Int: FanoutError] = [:]
        /// Why the members could not be listed (the turn went on with those it last read), or
        /// the node could not announce itself.
        package var membership: [FanoutError] = []
    }

    /// One round of the node's loop (see the type's description). What fails (NATS slow or gone,
    /// a server of its cluster lost) is tried again next turn; the rest goes on.
    @discardableResult
    package func turn() -> TurnFailures {
        let now = ContinuousClock.now
        var failures = TurnFailures()
        func attempt(_ shard: Int, _ body: () throws(FanoutError) -> Void) {
            self.locks[shard].withLock { _ in
                do throws(FanoutError) { try body() } catch { failures.shards[shard] = error }
                self.publish(shard)
            }
        }
        // First what is quick and must not wait: owners renew their leases. (Only this thread
        // changes roles, so it reads them without the shard's lock, and waits for no follower's
        // catching up.)
        for (shard, shardNode) in self.shards.enumerated() where shardNode.isOwner {
            attempt(shard) { () throws(FanoutError) in try shardNode.step() }
        }
        // Then the members, read in a third of a lease at most. When they cannot be (NATS slow,
        // a server of its cluster lost), the turn goes on with those it last read: the leases,
        // not the list, say who owns a shard, and a dead node's shards, free, are taken three
        // leases later as a stuck one's are.
        let live: Set<String>
        do throws(FanoutError) {
            live = Set(try self.members.writtenKeys(timeout: self.lease / 3)).union([self.node])
        } catch {
            failures.membership.append(error)
            live = Set(self.memberSince.keys).union([self.node])
        }
        if let (pins, _) = try? ShardPins.read(from: self.layout) { self.pins = pins }
        self.memberSince = live.reduce(into: [:]) { since, member in since[member] = self.memberSince[member] ?? now }
        // A node takes shards only once it has been a member for a lease: nodes started together
        // then see each other first, and take only their own share.
        let isSettled = self.memberSince[self.node].map { now - $0 >= self.lease } ?? false
        // Then the slow changes of role (each opens an engine), for a third of a lease at most so
        // that the next turn's renewals come in time: one shard handed on to its preferred owner,
        // or free shards taken.
        let deadline = now + self.lease / 3
        roles: for (shard, shardNode) in self.shards.enumerated() where ContinuousClock.now < deadline {
            let preferred = self.pins.owner(of: shard, among: live)
            switch shardNode.role {
            case .owning:
                guard let preferred, preferred != self.node, let since = self.memberSince[preferred], now - since >= self.lease else { continue }
                attempt(shard) { () throws(FanoutError) in try shardNode.release() }
                break roles
            case .following:
                attempt(shard) { () throws(FanoutError) in
                    let isFree = try self.ownership.owner(of: shard) == nil
                    // Counted from when this node settled: until then, the preferred owner may not
                    // have settled either.
                    if !isFree { self.freeSince[shard] = nil } else if isSettled, self.freeSince[shard] == nil { self.freeSince[shard] = now }
                    // Another node's shard only when its preferred owner, a member, left it free
                    // for three leases (stuck): a slow one takes its shards a few a turn.
                    let mayTake = isSettled && (preferred == self.node || self.freeSince[shard].map { now - $0 >= self.lease * 3 } ?? false)
                    if isFree && mayTake { try shardNode.step(mayTake: true) }
                }
            }
        }
        // Last, the node announces itself, with what it now holds (`fanout cluster status`).
        do throws(FanoutError) {
            try self.members.put(self.node, Array(NodeProgress(self.servedShards).encoded.utf8))
        } catch {
            failures.membership.append(error)
        }
        return failures
    }

    /// Applies what the shards' streams have delivered since (up to 4,096 messages a shard), on
    /// every shard this node follows, so that followers stay close behind their owners. It may run while a turn does (on another thread:
    /// a shard is stepped by one of them at a time), never at the same time as another `catchUp()`.
    /// - Returns: the shards whose catching up failed, with why.
    @discardableResult
    package func catchUp() -> [Int: FanoutError] {
        var failures: [Int: FanoutError] = [:]
        // A few messages of a shard under its lock at a time, round the shards, so that a turn
        // waiting for a shard's lock waits for those only; a bounded number of rounds, so that a
        // stream that never rests does not keep this call (and a stopping node) from returning.
        var behind = Array(self.shards.indices)
        for _ in 0..<Self.catchUpRounds where !behind.isEmpty {
            behind.removeAll { shard in
                self.locks[shard].withLock { _ in
                    defer { self.publish(shard) }
                    do throws(FanoutError) {
                        return try self.shards[shard].catchUp(atMost: Self.catchUpSlice)
                    } catch {
                        failures[shard] = error
                        return true
                    }
                }
            }
        }
        return failures
    }

    /// Writes the snapshots that are due (docs/scale-out.md, "Snapshots and purging"): each
    /// shard's engine, once `snapshotInterval` passed since its last one (or since the node
    /// started) and it logged anything since. A follower's snapshot bounds its own log; it is
    /// written under the shard's lock, between two catch-ups. An owner's is written while the
    /// shard goes on serving, then published (`ShardSnapshotStore`), and the shard's stream purged
    /// up to it, but not past what any member following the shard has applied (as its last turn
    /// announced): a follower that was not a member then starts again from the snapshot. Runs on
    /// the catch-up thread, never at the same time as `catchUp()`.
    /// - Returns: the shards whose snapshot, publish or purge failed, with why (tried again an
    ///   interval later).
    @discardableResult
    package func maintain(now: ContinuousClock.Instant = .now) -> [Int: FanoutError] {
        guard let interval = self.snapshotInterval else { return [:] }
        var failures: [Int: FanoutError] = [:]
        var followers: [Int: UInt64]?
        for shard in self.shards.indices where now - self.lastSnapshots[shard].at >= interval {
            do throws(FanoutError) {
                if let written = try self.snapshot(shard, unlessAt: self.lastSnapshots[shard].lsn, purging: true, followers: &followers) {
                    self.lastSnapshots[shard] = (now, written.lsn)
                }
            } catch {
                failures[shard] = error
                self.lastSnapshots[shard].at = now
            }
        }
        return failures
    }

    /// Snapshots every shard's engine now (the SNAPSHOT request on a cluster node), as `maintain()`
    /// does when they are due: owners' snapshots published and their streams purged (a purge that
    /// fails is left to the schedule's next snapshot). May run while `maintain()`, `catchUp()` and
    /// `turn()` do. Returns each snapshot's file, `shard-N/<name>`.
    /// - Throws: the first shard's failure, naming the shard, once every shard was tried.
    package func snapshotNow() throws(FanoutError) -> [String] {
        var followers: [Int: UInt64]?
        var names: [String] = []
        var failure: FanoutError?
        for shard in self.shards.indices {
            do throws(FanoutError) {
                if let written = try self.snapshot(shard, unlessAt: nil, purging: false, followers: &followers) {
                    names.append("shard-\(shard)/\(written.path.split(separator: "/").last ?? "")")
                }
            } catch {
                failure = failure ?? FanoutError(error.code, "shard \(shard): \(error.message)")
            }
        }
        if let failure { throw failure }
        return names
    }

    /// Snapshots shard `shard`'s engine, unless its log is still at LSN `last` (nothing logged
    /// since); an owner's is published and the stream purged (when `purging`, a failure to purge
    /// is thrown; else it is left for later). `followers`: per shard, the least sequence its
    /// followers applied (read from the members' announcements when first needed). Returns the
    /// snapshot's path and LSN; nil when nothing was written.
    private func snapshot(_ shard: Int, unlessAt last: UInt64?, purging: Bool, followers: inout [Int: UInt64]?) throws(FanoutError) -> (path: String, lsn: UInt64)? {
        let shardNode = self.shards[shard]
        // A follower's under the lock (its state and log must not move while it is written); for an
        // owner, only what it is.
        enum Role {
            case follower(written: (path: String, lsn: UInt64)?)
            case owner(Engine, term: String)
        }
        let role = try self.locks[shard].withLock { _ throws(FanoutError) -> Role in
            if let owned = shardNode.owned { return .owner(owned.engine, term: owned.term) }
            try shardNode.followAgainIfNeeded()
            guard let lsn = shardNode.engine.loggedThrough, lsn != last else { return .follower(written: nil) }
            let path = try shardNode.engine.snapshot()
            return .follower(written: Engine.lsn(ofSnapshot: path).map { (path, $0) })
        }
        switch role {
        case .follower(let written): return written
        case .owner(let engine, let term):
            guard let lsn = engine.loggedThrough, lsn != last else { return nil }
            // The engine snapshots while serving; should the node lose the shard meanwhile, closing
            // the engine waits for the snapshot, which covers only what the stream holds.
            let path = try engine.snapshot()
            guard let covered = Engine.lsn(ofSnapshot: path) else { throw FanoutError(.internal, "\(path) does not name a snapshot") }
            let published = try self.snapshots.publish(shard: shard, term: term, path: path, lsn: covered)
            do throws(FanoutError) {
                try self.purge(shard, before: published.lsn, followers: &followers)
            } catch {
                if purging { throw error }  // else the schedule's next snapshot purges
            }
            return (path, covered)
        }
    }

    /// Purges shard `shard`'s stream before `lsn`, not past what its followers applied.
    private func purge(_ shard: Int, before lsn: UInt64, followers: inout [Int: UInt64]?) throws(FanoutError) {
        if followers == nil { followers = try self.followerProgress() }
        let keeping = followers?[shard].map { $0 + 1 } ?? .max
        _ = try self.shards[shard].stream.purge(before: lsn, keeping: keeping, on: self.jetStream)
    }

    /// Per shard, the least stream sequence any member that follows it has applied, as the
    /// members last announced.
    private func followerProgress() throws(FanoutError) -> [Int: UInt64] {
        var least: [Int: UInt64] = [:]
        for progress in try NodeProgress.readAll(from: self.members).values {
            for case let (shard, applied?) in progress.applied {
                least[shard] = min(least[shard] ?? .max, applied)
            }
        }
        return least
    }

    /// The messages a follower applies under its shard's lock at once, and the rounds over the
    /// shards one `catchUp()` makes at most.
    static let catchUpSlice = 64
    static let catchUpRounds = 64

    /// Leaves the cluster: every shard this node owns is handed on (its engine closed, its lease
    /// released, so another node takes it at its next turn instead of after a lease), and every
    /// engine is closed.
    package func close() {
        for (shard, shardNode) in self.shards.enumerated() {
            self.locks[shard].withLock { _ in
                try? shardNode.release()
                try? shardNode.engine.close()
                self.publish(shard)
            }
        }
    }

    private func publish(_ shard: Int) {
        let shardNode = self.shards[shard]
        let view = ServedShard(engine: shardNode.engine, isOwner: shardNode.isOwner, appliedSequence: shardNode.appliedSequence, leaseExpiry: shardNode.leaseExpiry)
        self.served.withLock { $0[shard] = view }
    }
}
