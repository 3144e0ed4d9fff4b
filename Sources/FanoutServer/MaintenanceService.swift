public import FanoutCore
public import FanoutKeys
public import Logging
internal import NIOPosix
public import ServiceLifecycle

/// The engine's periodic work in a server: expiring deliveries whose TTL ran out (every
/// `expiryInterval`); pruning installations past `expireAfter` and removing the anonymous users
/// due in projects that turned automatic clean-up on (at start, then every `pruneInterval`); and,
/// when `snapshotInterval` is set, writing a snapshot (on the NIO thread pool: it does file I/O).
/// With `tokens`, it also rotates the signing key once it is `signingKeyLifetime` old and deletes
/// retired keys no token needs (with the prune). `afterPrune` runs after a prune deleted
/// installations (fanoutd closes their device connections). Ends on cancellation or graceful shutdown.
public struct MaintenanceService: Service, CustomStringConvertible {
    public var engine: Engine
    public var expiryInterval: Duration
    public var pruneInterval: Duration
    public var snapshotInterval: Duration?
    public var logger: Logger
    public var tokens: InstallationTokens?
    /// Seconds a signing key signs before a new one replaces it; nil: only when asked.
    public var signingKeyLifetime: Int64?
    public var afterPrune: (@Sendable () -> Void)?

    public init(
        engine: Engine,
        expiryInterval: Duration = .seconds(1),
        pruneInterval: Duration = .seconds(3600),
        snapshotInterval: Duration? = nil,
        logger: Logger = Logger(label: "fanoutd")
    ) {
        self.engine = engine
        self.expiryInterval = expiryInterval
        self.pruneInterval = pruneInterval
        self.snapshotInterval = snapshotInterval
        self.logger = logger
    }

    public var description: String { "MaintenanceService" }

    public func run() async throws {
        let clock = ContinuousClock()
        var nextPrune = clock.now  // at start, then every `pruneInterval`
        var nextSnapshot = self.snapshotInterval.map { clock.now.advanced(by: $0) }
        while !Task.isCancelled, !Task.isShuttingDownGracefully {
            do {
                try await cancelWhenGracefulShutdown {
                    try await Task.sleep(for: self.expiryInterval)
                }
            } catch {
                return
            }
            // While the log refuses changes (logged once by the engine), sweeps would only fail.
            guard self.engine.logFailure == nil else { continue }
            await self.expireDeliveries()
            if clock.now >= nextPrune {
                nextPrune = clock.now.advanced(by: self.pruneInterval)
                await self.pruneInstallations()
                await self.cleanUpAnonymousUsers()
                self.maintainSigningKeys()
            }
            if let due = nextSnapshot, clock.now >= due, let interval = self.snapshotInterval {
                nextSnapshot = clock.now.advanced(by: interval)
                await self.snapshot()
            }
        }
    }

    func expireDeliveries() async {
        for project in self.engine.projectIDs() {
            do {
                let expired = try await self.engine.expireDeliveries(in: project)
                if expired > 0 {
                    self.logger.debug("expired deliveries", metadata: ["project": "\(project)", "count": "\(expired)"])
                }
            } catch {
                self.report(error, "expiring deliveries failed", in: project)
            }
        }
    }

    func pruneInstallations() async {
        for project in self.engine.projectIDs() {
            do {
                let pruned = try await self.engine.pruneExpiredInstallations(in: project)
                if !pruned.isEmpty {
                    self.logger.info("pruned expired installations", metadata: ["project": "\(project)", "count": "\(pruned.count)"])
                    self.afterPrune?()
                }
            } catch {
                self.report(error, "pruning installations failed", in: project)
            }
        }
    }

    /// In each project whose automatic anonymous clean-up is on, removes the anonymous users due.
    func cleanUpAnonymousUsers() async {
        for project in self.engine.projectIDs() where (try? self.engine.anonymousCleanUpEnabledAt(in: project)) != nil {
            do {
                let removed = try await self.engine.cleanUpAnonymousUsers(in: project)
                if !removed.isEmpty {
                    self.logger.info("removed anonymous users", metadata: ["project": "\(project)", "count": "\(removed.count)"])
                }
            } catch {
                self.report(error, "anonymous clean-up failed", in: project)
            }
        }
    }

    /// Logs a sweep's failure as a warning; at debug level when the engine was closed meanwhile (a
    /// cluster node sweeping a shard it just stopped owning: its next owner sweeps it), which
    /// refuses with UNAVAILABLE and changes nothing.
    private func report(_ error: any Error, _ message: Logger.Message, in project: ProjectID) {
        let closedMeanwhile = (error as? FanoutError).map(self.engine.refusedAsClosed) ?? false
        let level: Logger.Level = closedMeanwhile ? .debug : .warning
        self.logger.log(level: level, message, metadata: ["project": "\(project)", "error": "\(error)"])
    }

    /// Rotates the signing key when it is due and deletes the retired keys no token needs.
    func maintainSigningKeys() {
        guard let tokens = self.tokens else { return }
        let now = self.engine.clock.now().secondsSinceEpoch
        do {
            if let lifetime = self.signingKeyLifetime, now - tokens.keys.current.createdAt >= lifetime {
                let id = try tokens.keys.rotate(now: now)
                self.logger.notice("rotated the signing key", metadata: ["kid": "\(id)"])
            }
            let dropped = try tokens.keys.prune(now: now, tokenLifetime: tokens.lifetime)
            if !dropped.isEmpty {
                self.logger.info("deleted retired signing keys", metadata: ["kids": "\(dropped.joined(separator: ","))"])
            }
        } catch {
            self.logger.warning("signing key maintenance failed", metadata: ["error": "\(error)"])
        }
    }

    func snapshot() async {
        let engine = self.engine
        do {
            let started = ContinuousClock.now
            let file = try await NIOThreadPool.singleton.runIfActive { try engine.snapshot() }
            self.logger.info("snapshot written", metadata: ["file": "\(file)", "duration": "\(ContinuousClock.now - started)"])
        } catch {
            self.logger.warning("snapshot failed", metadata: ["error": "\(error)"])
        }
    }
}
