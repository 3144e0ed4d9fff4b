package import FanoutCluster
internal import FanoutCore
package import FanoutKeys
package import FanoutModel
package import FanoutWire
package import Logging
internal import NIOPosix
package import ServiceLifecycle

/// A cluster node's loops (docs/scale-out.md), run as a service next to its `FanoutServer`: a turn
/// every third of the lease (renew, take and hand on shards, announce the node), after which the
/// node answers the requests of exactly the shards it owns and its consumers follow; and, on
/// another thread at the same time, the followers catching up every `catchUpInterval` (a long
/// catch-up under load never delays a renewal), and between catch-ups the shards' snapshots when
/// they are due (`ClusterNode.maintain()`); on a third, every two leases, the nodes' signing keys
/// read again (and this node's rotated when due); and the engine's sweeps (expiry, pruning) on the shards it owns. The
/// calls block on NATS, so they run on threads of the service's own. On shutdown (after the server's, so list it first in the service
/// group) it stops answering, hands its shards on and closes their engines.
package final class ClusterService: Service, Sendable {
    package let node: ClusterNode
    let router: ClusterRouter
    /// The auth tokens this node signs and accepts; nil: it issues no credentials.
    let tokens: InstallationTokens?
    private let signingKeyLifetime: Int64?
    /// What runs after each of the node's turns (`afterEachTurn`).
    private let turnObservers = Locked<[@Sendable () -> Void]>([])
    private let catchUpInterval: Duration
    private let expiryInterval: Duration
    private let pruneInterval: Duration
    private let logger: Logger

    /// With `signingKeys`, the node issues installation credentials for the shards it owns and
    /// accepts every node's auth tokens (valid `tokenLifetime` seconds); with
    /// `signingKeyLifetime`, it rotates its own key once the key is that many seconds old.
    package init(
        node: ClusterNode,
        signingKeys: ClusterSigningKeys? = nil,
        tokenLifetime: Int64 = 7 * 86_400,
        signingKeyLifetime: Int64? = nil,
        maximumPayloadSize: Int = FrameHeader.defaultMaximumPayloadSize,
        catchUpInterval: Duration = .milliseconds(100),
        expiryInterval: Duration = .seconds(1),
        pruneInterval: Duration = .seconds(3600),
        logger: Logger = Logger(label: "fanoutd")
    ) throws(FanoutError) {
        self.node = node
        self.tokens = signingKeys?.tokens(lifetime: tokenLifetime)
        self.signingKeyLifetime = signingKeyLifetime
        self.router = ClusterRouter(try ShardRequests(node: node, maximumPayloadSize: maximumPayloadSize, tokens: self.tokens), signingKeys: signingKeys)
        self.catchUpInterval = catchUpInterval
        self.expiryInterval = expiryInterval
        self.pruneInterval = pruneInterval
        self.logger = logger
    }

    /// The reply to `request`, routed as a TCP client's is, for a caller that checked the client's
    /// key itself (the HTTP front): as an admin's, an app's (`asApp`: a REGISTER that creates
    /// only), or an installation's that `presented` its refresh token.
    package func perform(_ request: ClientRequest, asApp: Bool = false, presented: RefreshToken? = nil) async -> ServerMessage {
        let principal = presented.map { Principal.refresh($0) } ?? (asApp ? ShardRequests.appPrincipal : ShardRequests.principal)
        return await self.router.perform(request, principal: principal)
    }

    /// Whether every shard this node owns accepts changes (none of their logs has failed).
    package var acceptsChanges: Bool {
        self.node.servedShards.allSatisfy { !$0.isOwner || $0.engine.logFailure == nil }
    }

    package func run() async throws {
        let node = self.node
        let pool = NIOThreadPool(numberOfThreads: 3)
        pool.start()
        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    while !Task.isCancelled {
                        let started = ContinuousClock.now
                        let owned = node.ownedShards
                        guard let failures = try? await pool.runIfActive({ node.turn() }) else { break }  // the pool stopped
                        for observer in self.turnObservers.withLock({ $0 }) { observer() }
                        self.router.shards.followOwnership()
                        self.router.shardConsumers.followOwnership()
                        self.router.refreshConsumers()
                        self.log(failures.shards, "turn failed")
                        for error in failures.membership { self.logger.warning("cluster: the node's turn: \(error)") }
                        self.logChanges(from: owned, to: node.ownedShards, turnTook: ContinuousClock.now - started)
                        try? await Task.sleep(until: started + node.lease / 3)
                    }
                }
                group.addTask { await self.sweepOwnedShards() }
                if let keys = self.router.signingKeys {
                    // Not in the turns' loop: a slow NATS (a server down) must not delay a renewal.
                    group.addTask {
                        while !Task.isCancelled {
                            let started = ContinuousClock.now
                            do {
                                try await pool.runIfActive { try self.renew(keys) }
                            } catch is CancellationError {
                                break
                            } catch {
                                self.logger.warning("cluster: cannot read or renew the nodes' signing keys: \(error)")
                            }
                            // A listing is a consumer on the bucket's stream: not more often than this.
                            try? await Task.sleep(until: started + node.lease * 2)
                        }
                    }
                }
                group.addTask {
                    while !Task.isCancelled {
                        if let failures = try? await pool.runIfActive({ node.catchUp() }) { self.log(failures, "could not catch up") }
                        if let failures = try? await pool.runIfActive({ node.maintain() }) { self.log(failures, "snapshot failed") }
                        try? await Task.sleep(for: self.catchUpInterval)
                    }
                }
            }
        }
        self.router.shards.stopAnswering()
        self.router.shardConsumers.stop()
        try await pool.runIfActive { node.close() }
        try await pool.shutdownGracefully()
    }

    /// Runs `body` after each of the node's turns (a server's device connections check their
    /// credentials against the node's copies of their shards then).
    package func afterEachTurn(_ body: @escaping @Sendable () -> Void) {
        self.turnObservers.withLock { $0.append(body) }
    }

    /// Rotates this node's signing key once it is `signingKeyLifetime` old, then reads every
    /// node's keys again (keys another node made since are accepted from now on), every two leases.
    /// Blocks on NATS.
    private func renew(_ keys: ClusterSigningKeys) throws(FanoutError) {
        let now = self.node.served(0).engine.clock.now().secondsSinceEpoch
        if let lifetime = self.signingKeyLifetime, now - keys.own.current.createdAt >= lifetime {
            let id = try keys.rotate(now: now, tokenLifetime: self.tokens?.lifetime ?? lifetime)
            self.logger.notice("cluster: rotated the node's signing key", metadata: ["kid": "\(id)"])
        }
        try keys.refresh()
    }

    /// The engine's periodic sweeps, as one fanoutd's `MaintenanceService` makes them, on the
    /// shards this node owns (a follower applies their results from the stream): expired
    /// deliveries every `expiryInterval`; installations past their expiry and the anonymous users
    /// due, at start and every `pruneInterval`.
    private func sweepOwnedShards() async {
        var nextPrune = ContinuousClock.now
        while !Task.isCancelled {
            try? await Task.sleep(for: self.expiryInterval)
            let isPruneDue = ContinuousClock.now >= nextPrune
            if isPruneDue { nextPrune = ContinuousClock.now + self.pruneInterval }
            for served in self.node.servedShards where served.isOwner && served.engine.logFailure == nil {
                let sweep = MaintenanceService(engine: served.engine, logger: self.logger)
                await sweep.expireDeliveries()
                if isPruneDue {
                    await sweep.pruneInstallations()
                    await sweep.cleanUpAnonymousUsers()
                }
            }
        }
    }

    private func logChanges(from before: Set<Int>, to after: Set<Int>, turnTook: Duration) {
        for shard in after.subtracting(before).sorted() {
            self.logger.info("cluster: shard \(shard): owned here now", metadata: ["turn": "\(turnTook)"])
        }
        for shard in before.subtracting(after).sorted() {
            self.logger.info("cluster: shard \(shard): no longer owned here", metadata: ["turn": "\(turnTook)"])
        }
    }

    private func log(_ failures: [Int: FanoutError], _ what: String) {
        for (shard, error) in failures.sorted(by: { $0.key < $1.key }) {
            self.logger.warning("cluster: shard \(shard): \(what): \(error)")
        }
    }
}
