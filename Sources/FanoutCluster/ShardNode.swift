package import FanoutCore

#if canImport(Glibc)
import Glibc
#endif

/// One node's part in one shard (docs/scale-out.md): it follows the shard's stream on its data
/// directory while another node owns the shard, takes the shard once nobody holds its lease, and
/// owns it while it renews the lease; an owner that lost its lease follows again. `step()` is one
/// turn of that loop: a node calls it every third of the lease, from a thread of its own (the
/// calls block on NATS).
///
/// A directory whose log is not the stream's (a deposed owner's, with changes the stream never
/// got) is set aside (renamed `<directory>.diverged-<seconds>`, kept for inspection) and the node
/// follows from the stream's start in a fresh one. A directory that never held an owner's log
/// (marked `FOLLOWER-ONLY`) is not checked: its log is only what it applied from the stream.
package final class ShardNode: @unchecked Sendable {
    // Touched by the one thread that steps it.
    package enum Role: Sendable {
        case following
        case owning(ShardOwnership.Lease)
    }

    package let node: String
    package let stream: ShardStream
    private let directory: String
    private let durability: Durability
    private let configuration: EngineConfiguration
    private let jetStream: JetStream
    private let ownership: ShardOwnership
    /// Where a follower the stream was purged past starts again (nil: nowhere, it fails).
    private let snapshots: ShardSnapshotStore?
    /// The owner's engines' metrics (each engine that owns the shard here counts into them); the
    /// follower's engines have none.
    private let ownerMetrics: EngineMetrics
    /// The node's engine: a follower's, or once it owns the shard, the owner's.
    package private(set) var engine: Engine
    package private(set) var role = Role.following
    /// When the lease this node holds runs out at the latest, counted from before it asked for it
    /// (NATS counts from when it wrote it); nil while it follows.
    package private(set) var leaseExpiry: ContinuousClock.Instant?
    private var follower: ShardFollower
    /// Whether the node must follow again from its directory at its next step or catch-up (the
    /// stream was purged past what it applied, or it stopped owning and could not follow yet).
    private var mustFollowAgain = false
    /// The directories set aside, oldest first.
    package private(set) var setAside: [String] = []

    /// Starts as a follower of `stream` on `directory`; its engines (follower's and owner's) open
    /// the directory with `durability` and `configuration`, an owner's with `ownerMetrics`. With
    /// `snapshots`, a directory the stream was purged past starts from the shard's published
    /// snapshot.
    package init(
        node: String,
        stream: ShardStream,
        directory: String,
        durability: Durability = .always,
        configuration: EngineConfiguration = EngineConfiguration(),
        jetStream: JetStream,
        ownership: ShardOwnership,
        snapshots: ShardSnapshotStore? = nil,
        ownerMetrics: EngineMetrics = .none
    ) throws(FanoutError) {
        self.node = node
        self.stream = stream
        self.directory = directory
        self.durability = durability
        self.configuration = configuration
        self.jetStream = jetStream
        self.ownership = ownership
        self.snapshots = snapshots
        self.ownerMetrics = ownerMetrics
        (self.engine, self.follower, self.setAside) = try Self.follow(
            node: node, stream: stream, directory: directory, durability: durability, configuration: configuration, jetStream: jetStream,
            snapshots: snapshots
        )
    }

    /// One turn: an owner renews its lease, and follows again once it lost the shard (or its log
    /// failed for good: it then frees the lease at once); a follower
    /// catches up, and (when `mayTake`) takes the shard once nobody holds it (catching up again,
    /// then opening the owner's engine under the lease's term).
    /// - Throws: `UNAVAILABLE` when NATS does not answer (the next turn tries again), and what
    ///   opening an engine throws.
    package func step(mayTake: Bool = true) throws(FanoutError) {
        switch self.role {
        case .owning(let lease):
            if self.engine.logFailure != nil {
                // Its log refuses changes for good (deposed by another publisher, a failed disk):
                // holding the lease would keep the shard refusing; another node takes it.
                try? self.ownership.release(lease)
                try self.followAgain()
                return
            }
            let asked = ContinuousClock.now
            if let renewed = try self.ownership.renew(lease, for: self.node) {
                (self.role, self.leaseExpiry) = (.owning(renewed), asked + self.ownership.lease)
                return
            }
            try self.followAgain()
        case .following:
            try self.followAgainIfNeeded()
            _ = try self.behindWhenRefused { () throws(FanoutError) in try self.follower.catchUp() }
            let asked = ContinuousClock.now
            guard mayTake, try self.ownership.owner(of: self.stream.shard) == nil, let lease = try self.ownership.take(self.stream.shard, for: self.node) else { return }
            // What the last owner published before its lease lapsed, then the fence: the last owner
            // may still be publishing (it learns of its lapsed lease only at its next renewal).
            let publisher = try ShardPublisher(self.jetStream, stream: self.stream, term: self.term(of: lease))
            try self.fence(publisher)
            self.follower.stopReading()
            try self.engine.close()
            do {
                // From now on the log holds changes the stream may never get: checked at every start.
                try Self.mark(self.directory, followerOnly: false)
                self.engine = try Engine.shardOwner(
                    directory: self.directory, durability: self.durability, configuration: self.configuration, metrics: self.ownerMetrics,
                    publisher: publisher, followed: true
                )
                (self.role, self.leaseExpiry) = (.owning(lease), asked + self.ownership.lease)
            } catch {
                // Cannot own it (the stream moved on meanwhile): follow again; the lease lapses.
                try self.followAgain()
                throw error
            }
        }
    }

    /// Catches up to the stream's end and fences it for `publisher` (`ShardPublisher.fence`), again
    /// while the last owner appended in between (a few times at most).
    private func fence(_ publisher: ShardPublisher) throws(FanoutError) {
        for attempt in 1...5 {
            try self.follower.catchUp()
            do throws(FanoutError) {
                try publisher.fence(through: self.engine.loggedThrough ?? 0, after: self.follower.appliedSequence)
                return
            } catch where error.code == .failedPrecondition && attempt < 5 {
                continue  // the last owner appended meanwhile
            }
        }
    }

    /// A follower applies what the stream gained since, at most `limit` messages of it: whether
    /// it reached the stream's end (always for an owner, which has nothing to apply).
    /// A follower the stream was purged past (a node the owner did not know of when it purged)
    /// throws `FAILED_PRECONDITION`, and its next call starts it again from the shard's snapshot.
    @discardableResult
    package func catchUp(atMost limit: Int = .max) throws(FanoutError) -> Bool {
        guard case .following = self.role else { return true }
        try self.followAgainIfNeeded()
        return try self.behindWhenRefused { () throws(FanoutError) in try self.follower.catchUp(atMost: limit).reachedEnd }
    }

    private func behindWhenRefused<Result>(_ body: () throws(FanoutError) -> Result) throws(FanoutError) -> Result {
        do {
            return try body()
        } catch where error.code == .failedPrecondition {
            self.mustFollowAgain = true
            throw error
        }
    }

    /// The term an owner publishes under: the node and its lease's revision.
    private func term(of lease: ShardOwnership.Lease) -> String {
        "\(self.node).\(lease.revision)"
    }

    /// The owner's engine and term, while this node owns the shard.
    package var owned: (engine: Engine, term: String)? {
        guard case .owning(let lease) = self.role else { return nil }
        return (self.engine, self.term(of: lease))
    }

    /// Whether this node owns the shard now.
    package var isOwner: Bool {
        if case .owning = self.role { true } else { false }
    }

    /// An owner hands the shard on: it closes its engine (answering what its replica holds), then
    /// frees the lease for another node to take at once, and follows. Nothing for a follower.
    package func release() throws(FanoutError) {
        guard case .owning(let lease) = self.role else { return }
        var failure: FanoutError?
        do throws(FanoutError) { try self.followAgain() } catch { failure = error }
        try self.ownership.release(lease)
        if let failure { throw failure }
    }

    /// How far this node has applied the shard's stream (its sequence), while it follows; nil
    /// while it owns the shard.
    package var appliedSequence: UInt64? {
        guard case .following = self.role else { return nil }
        return self.follower.appliedSequence
    }

    /// Closes the engine (an owner's stops owning) and follows the stream again on the directory
    /// (`follow`). Until that succeeds, the node follows with its engine closed (its reads answer
    /// from memory) and every step and catch-up tries again.
    private func followAgain() throws(FanoutError) {
        try? self.engine.close()
        if self.isOwner { self.ownerMetrics.clearGauges() }
        (self.role, self.leaseExpiry, self.mustFollowAgain) = (.following, nil, true)
        let (engine, follower, setAside) = try Self.follow(
            node: self.node, stream: self.stream, directory: self.directory, durability: self.durability, configuration: self.configuration,
            jetStream: self.jetStream, snapshots: self.snapshots
        )
        (self.engine, self.follower, self.mustFollowAgain) = (engine, follower, false)
        self.setAside += setAside
    }

    /// Follows again if the node must (`mustFollowAgain`): a follower's engine is then open.
    package func followAgainIfNeeded() throws(FanoutError) {
        if self.mustFollowAgain { try self.followAgain() }
    }

    /// A follower's engine on `directory`, checked against the stream; a directory that fails the
    /// check is set aside for a fresh one, and one the stream was purged past (a node back after a
    /// long absence, a new node, a fresh directory) starts again from the shard's published
    /// snapshot.
    private static func follow(
        node: String,
        stream: ShardStream,
        directory: String,
        durability: Durability,
        configuration: EngineConfiguration,
        jetStream: JetStream,
        snapshots: ShardSnapshotStore?
    ) throws(FanoutError) -> (Engine, ShardFollower, setAside: [String]) {
        func open(check: Engine.LogCheck? = nil) throws(FanoutError) -> Engine {
            try Engine(directory: directory, durability: durability, configuration: configuration, metrics: .none, check: check, replication: nil)
        }
        // A directory that does not exist yet, or never held an owner's log, needs no check (the
        // check reads the stream back to this node's last batch, and on from there).
        let isFollowerOnly = !FileIO.exists(directory) || FileIO.exists("\(directory)/\(Self.followerOnlyMarker)")
        var setAside: [String] = []
        var engine: Engine
        do {
            engine = try open(check: isFollowerOnly ? nil : ShardLog.check(directory: directory, against: stream, jetStream, node: node, exactly: false))
        } catch where error.code == .failedPrecondition && !isFollowerOnly {
            // Its log holds changes the stream never got, or can no longer be checked (the
            // stream was purged past this node's last batch): kept aside, for inspection.
            let aside = "\(directory).diverged-\(time(nil))"
            guard rename(directory, aside) == 0 else {
                throw FanoutError(.unavailable, "cannot set aside \(directory), whose log is not \(stream.name)'s: errno \(errno)")
            }
            setAside.append(aside)
            engine = try open()
        }
        // Checked (or fresh): its log is the stream's, so far; the next start need not check it.
        let follower: ShardFollower
        do {
            try Self.mark(directory, followerOnly: true)
            var seeded = 0
            while true {
                do {
                    follower = try ShardFollower(jetStream, stream: stream, resuming: engine)
                    break
                } catch where error.code == .failedPrecondition && seeded < 5 {
                    // Behind the stream's purge (what it holds, the snapshot and the stream hold
                    // too), or a newer snapshot's purge passed the one it started from meanwhile.
                    try? engine.close()
                    engine = try Self.seed(directory, stream: stream, from: snapshots) { () throws(FanoutError) in try open() }
                    seeded += 1
                }
            }
        } catch {
            try? engine.close()
            throw error
        }
        return (engine, follower, setAside)
    }

    /// Replaces `directory` with the shard's newest published snapshot, marked follower-only,
    /// and opens it.
    /// - Throws: `UNAVAILABLE` when no snapshot is published, or it cannot be read or written.
    private static func seed(
        _ directory: String,
        stream: ShardStream,
        from snapshots: ShardSnapshotStore?,
        open: () throws(FanoutError) -> Engine
    ) throws(FanoutError) -> Engine {
        guard let snapshots, var entry = try snapshots.latest(of: stream.shard) else {
            throw FanoutError(.unavailable, "\(stream.name) was purged, and no snapshot of shard \(stream.shard) is published to start from")
        }
        // Next to the directory (on its file system), a chunk at a time, then moved in.
        let download = "\(directory).snapshot-download"
        while true {
            do {
                try snapshots.download(entry, to: download)
                break
            } catch where error.code == .unavailable {
                // A newer snapshot replaced it while it came (its chunks purged): that one, then.
                guard let newer = try snapshots.latest(of: stream.shard), newer != entry else { throw error }
                entry = newer
            }
        }
        defer { try? FileIO.unlink(download) }
        do throws(FileIO.Error) {
            try FileIO.removeTree(directory)
        } catch {
            throw FanoutError(.unavailable, "cannot clear \(directory) for the shard's snapshot: \(error)")
        }
        try Engine.seed(directory: directory, snapshot: download, lsn: entry.lsn)
        try Self.mark(directory, followerOnly: true)
        return try open()
    }

    /// The file that marks a shard directory whose log holds nothing but what its node applied
    /// from the stream, in the stream's order.
    static let followerOnlyMarker = "FOLLOWER-ONLY"

    /// Writes (`followerOnly`) or removes the marker in `directory`, and syncs the directory, so
    /// that a crash cannot leave a marker in a directory whose log an owner wrote to.
    static func mark(_ directory: String, followerOnly: Bool) throws(FanoutError) {
        let path = "\(directory)/\(Self.followerOnlyMarker)"
        do throws(FileIO.Error) {
            if followerOnly {
                try FileIO.replaceDurably(path, with: [], directory: directory)
            } else if FileIO.exists(path) {
                try FileIO.unlink(path)
                try FileIO.syncDirectory(directory)
            }
        } catch {
            throw FanoutError(.unavailable, "cannot \(followerOnly ? "write" : "remove") \(path): \(error)")
        }
    }
}
