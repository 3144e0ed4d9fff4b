import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The fanout engine: the one facade that owns every project's installations, users and topics.
///
/// Thread-safe. Each project has its own lock, held only for in-memory work (never across I/O),
/// so projects never contend with each other. Audience resolution copies the subscriber sets it
/// needs under the lock (copy-on-write retains) and does the set algebra after releasing it.
///
/// Opened on a directory (`init(directory:durability:configuration:clock:)`), every change is a
/// record in the write-ahead log: it is queued under the project lock (so the log order is the
/// order of application) and the call returns once the record is as durable as `durability` says.
/// Reads see changes as soon as they are applied. `init(configuration:clock:)` is the same engine
/// in memory only.
public final class Engine: Sendable {
    final class ProjectBox: Sendable {
        let state: Locked<ProjectState>

        init(_ state: ProjectState) {
            self.state = Locked(state)
        }
    }

    public let configuration: EngineConfiguration
    let clock: any WallClock
    let projects: Locked<[ProjectID: ProjectBox]>
    /// The log, when the engine is durable.
    let wal: WALWriter?
    /// The data directory, when the engine is durable.
    let directory: String?
    /// The `flock` on the data directory (released by `close`).
    private let directoryLock: Mutex<Int32?>
    /// What recovery found when the engine was opened on a directory.
    public let recovery: RecoveryReport?
    let logger: Logger
    /// Set when the state could not be rebuilt from the log after a log failure: every call then
    /// fails rather than answer from a state that may hold refused changes.
    let halted = Mutex<FanoutError?>(nil)
    private let isHalted = Atomic<Bool>(false)
    /// Held while files are removed after a snapshot and while the state is rebuilt from them.
    let fileMaintenance = Mutex(())

    /// An in-memory engine with only the default project.
    public init(configuration: EngineConfiguration = EngineConfiguration(), clock: any WallClock = SystemWallClock()) {
        self.configuration = configuration
        self.clock = clock
        self.projects = Locked([.default: ProjectBox(ProjectState(id: .default, configuration: configuration))])
        self.wal = nil
        self.directory = nil
        self.directoryLock = Mutex(nil)
        self.recovery = nil
        self.logger = Logger(label: "fanout")
    }

    init(
        configuration: EngineConfiguration,
        clock: any WallClock,
        projects: [ProjectID: ProjectState],
        wal: WALWriter,
        directory: String,
        directoryLock: Int32,
        recovery: RecoveryReport,
        logger: Logger
    ) {
        self.configuration = configuration
        self.clock = clock
        self.projects = Locked(projects.mapValues { ProjectBox($0) })
        self.wal = wal
        self.directory = directory
        self.directoryLock = Mutex(directoryLock)
        self.recovery = recovery
        self.logger = logger
        wal.setFailureHandler { [weak self] lsn in self?.rebuildState(through: lsn) }
    }

    /// What the write-ahead log has done since the engine opened (nil in memory).
    public var logStatistics: WALStatistics? {
        self.wal?.currentStatistics
    }

    /// Why changes are refused now: the log failed (a full disk, an I/O error) and has not yet
    /// continued, or the engine halted. Nil while changes are accepted (and for an in-memory engine).
    /// For health checks; the failure itself is logged once, at error level.
    public var logFailure: FanoutError? {
        self.halted.withLock { $0 } ?? self.wal?.currentFailure
    }

    /// Flushes and syncs the log and releases the data directory. Changes after this fail with
    /// `UNAVAILABLE` (reads still answer from memory). A no-op for an in-memory engine.
    public func close() throws(FanoutError) {
        guard let descriptor = self.directoryLock.withLock({ lock -> Int32? in
            defer { lock = nil }
            return lock
        }) else { return }
        defer { Glibc.close(descriptor) }
        self.finishConsumers()
        try self.wal?.close()
    }

    // MARK: - Projects

    /// Creates a project. - Throws: `ALREADY_EXISTS`.
    public func createProject(_ id: ProjectID) throws(FanoutError) {
        try self.checkNotHalted()
        let lsn = try self.projects.withLock { (projects: inout [ProjectID: ProjectBox]) throws(FanoutError) -> WALTicket? in
            guard projects[id] == nil else {
                throw FanoutError(.alreadyExists, "project \(id) exists", field: "project")
            }
            try self.wal?.checkHealthy()
            let lsn = try self.wal?.append([.createProject(id)])
            projects[id] = ProjectBox(ProjectState(id: id, configuration: self.configuration))
            return lsn
        }
        try self.awaitLog(lsn)
    }

    /// The projects, sorted.
    public func projectIDs() -> [ProjectID] {
        self.projects.withLock { $0.keys.sorted() }
    }

    /// Deletes a project and everything in it. The default project cannot be deleted.
    /// - Throws: `NOT_FOUND`, or `FAILED_PRECONDITION` for the default project.
    public func deleteProject(_ id: ProjectID) throws(FanoutError) {
        guard id != .default else {
            throw FanoutError(.failedPrecondition, "the default project cannot be deleted", field: "project")
        }
        try self.checkNotHalted()
        let lsn = try self.projects.withLock { (projects: inout [ProjectID: ProjectBox]) throws(FanoutError) -> WALTicket? in
            guard projects[id] != nil else {
                throw .notFound("no project \(id)", field: "project")
            }
            try self.wal?.checkHealthy()
            let lsn = try self.wal?.append([.deleteProject(id)])
            projects[id]?.state.withLock { $0.finishConsumers() }
            projects[id] = nil
            return lsn
        }
        try self.awaitLog(lsn)
    }

    // MARK: - Installations

    /// Registers an installation; the engine assigns the FID when the offered one is missing,
    /// invalid, taken or retired. Repeating a registration (a retry after a lost reply) answers
    /// the existing installation with `isExisting` set and changes nothing.
    @discardableResult
    public func register(_ request: RegistrationRequest, in project: ProjectID = .default) throws(FanoutError) -> RegistrationResult {
        let now = self.clock.now()
        return try self.mutate(project) { (state: inout ProjectState) throws(FanoutError) in
            let result = try state.register(request, now: now)
            if result.isExisting { return (result, []) }
            let i = result.installation
            let record = WALRecord.register(
                project,
                .init(fid: i.fid, token: i.token, platform: i.platform, appID: i.appID, device: i.device, apnsToken: i.apnsToken, at: now)
            )
            return (result, [record])
        }
    }

    /// Rotates an installation's token: the old one is `UNREGISTERED` from now on; topics stay.
    public func refreshToken(
        _ address: RegistrationAddress,
        to token: RegistrationToken,
        in project: ProjectID = .default
    ) throws(FanoutError) -> Installation {
        let now = self.clock.now()
        return try self.mutate(project) { (state: inout ProjectState) throws(FanoutError) in
            let installation = try state.refreshToken(address, to: token, now: now)
            return (installation, [.refreshToken(project, fid: installation.fid, token: token, at: now)])
        }
    }

    /// Records that the installation was seen now.
    @discardableResult
    public func touch(_ address: RegistrationAddress, in project: ProjectID = .default) throws(FanoutError) -> Installation {
        let now = self.clock.now()
        return try self.mutate(project) { (state: inout ProjectState) throws(FanoutError) in
            let installation = try state.touch(address, now: now)
            return (installation, [.touch(project, fid: installation.fid, at: now)])
        }
    }

    public func installation(_ address: RegistrationAddress, in project: ProjectID = .default) throws(FanoutError) -> Installation {
        try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in
            try state.installation(address)
        }
    }

    /// The installation in `slot`, if that slot is live (slots come from audience resolution).
    public func installation(atSlot slot: UInt32, in project: ProjectID = .default) throws(FanoutError) -> Installation? {
        try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in
            state.registry.installation(atSlot: slot)
        }
    }

    /// Deletes an installation with its token, subscriptions and user binding; returns what it was.
    @discardableResult
    public func deleteInstallation(_ fid: FID, in project: ProjectID = .default) throws(FanoutError) -> Installation {
        try self.mutate(project) { (state: inout ProjectState) throws(FanoutError) in
            (try state.delete(fid), [.deleteInstallation(project, fid: fid)])
        }
    }

    /// Installations not seen for `staleAfter` (30 days by default), least recently seen first.
    public func staleInstallations(in project: ProjectID = .default) throws(FanoutError) -> [Installation] {
        let now = self.clock.now()
        return try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in
            state.staleInstallations(now: now)
        }
    }

    /// Deletes installations not seen for `expireAfter` (270 days by default); returns them.
    @discardableResult
    public func pruneExpiredInstallations(in project: ProjectID = .default) throws(FanoutError) -> [Installation] {
        let now = self.clock.now()
        return try self.mutate(project) { (state: inout ProjectState) throws(FanoutError) in
            let expired = state.pruneExpired(now: now)
            return (expired, expired.isEmpty ? [] : [.pruneExpiredInstallations(project, at: now)])
        }
    }

    /// The number of live installations.
    public func installationCount(in project: ProjectID = .default) throws(FanoutError) -> Int {
        try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in state.registry.count }
    }

    // MARK: - Users

    /// Binds an installation to a user (created on first use); a device bound elsewhere moves.
    @discardableResult
    public func bindDevice(
        _ address: RegistrationAddress,
        to user: UserID,
        anonymous: Bool = false,
        in project: ProjectID = .default
    ) throws(FanoutError) -> Installation {
        let now = self.clock.now()
        return try self.mutate(project) { (state: inout ProjectState) throws(FanoutError) in
            let installation = try state.bind(address, to: user, anonymous: anonymous, now: now)
            return (installation, [.bindDevice(project, fid: installation.fid, user: user, anonymous: anonymous, at: now)])
        }
    }

    /// Signs a user out of one device: unbinds it and drops its token before returning.
    @discardableResult
    public func signOut(
        _ user: UserID,
        on address: RegistrationAddress,
        in project: ProjectID = .default
    ) throws(FanoutError) -> Installation {
        try self.mutate(project) { (state: inout ProjectState) throws(FanoutError) in
            let installation = try state.signOut(user, on: address)
            return (installation, [.signOut(project, user: user, fid: installation.fid)])
        }
    }

    /// Links an anonymous user to a permanent one, which takes over the devices.
    @discardableResult
    public func linkUser(
        anonymous: UserID,
        to permanent: UserID,
        in project: ProjectID = .default
    ) throws(FanoutError) -> User {
        let now = self.clock.now()
        return try self.mutate(project) { (state: inout ProjectState) throws(FanoutError) in
            let user = try state.link(anonymous: anonymous, to: permanent, now: now)
            return (user, [.linkUser(project, anonymous: anonymous, permanent: permanent, at: now)])
        }
    }

    /// A user with their devices. - Throws: `NOT_FOUND`.
    public func user(_ id: UserID, in project: ProjectID = .default) throws(FanoutError) -> User {
        try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in try state.user(id) }
    }

    /// Removes anonymous users idle for `anonymousUserLifetime`; their devices stay, unbound.
    @discardableResult
    public func cleanUpAnonymousUsers(in project: ProjectID = .default) throws(FanoutError) -> [UserID] {
        let now = self.clock.now()
        return try self.mutate(project) { (state: inout ProjectState) throws(FanoutError) in
            let removed = state.cleanUpAnonymousUsers(now: now)
            return (removed, removed.isEmpty ? [] : [.cleanUpAnonymousUsers(project, at: now)])
        }
    }

    // MARK: - Topics

    /// Subscribes up to 1000 registrations (each a FID or a token) to `topic`; one result per
    /// registration, in input order. Subscribing twice is not an error.
    /// - Throws: `INVALID_ARGUMENT` for more than `maximumBatchSize` registrations (nothing applied).
    public func subscribe(
        _ registrations: [String],
        to topic: TopicName,
        in project: ProjectID = .default
    ) throws(FanoutError) -> [BatchItemResult] {
        try self.mutate(project) { (state: inout ProjectState) throws(FanoutError) in
            let (results, fids) = try state.subscribe(registrations, to: topic)
            return (results, fids.isEmpty ? [] : [.subscribe(project, topic: topic, fids: fids)])
        }
    }

    /// Unsubscribes up to 1000 registrations from `topic`; one result per registration.
    public func unsubscribe(
        _ registrations: [String],
        from topic: TopicName,
        in project: ProjectID = .default
    ) throws(FanoutError) -> [BatchItemResult] {
        try self.mutate(project) { (state: inout ProjectState) throws(FanoutError) in
            let (results, fids) = try state.unsubscribe(registrations, from: topic)
            return (results, fids.isEmpty ? [] : [.unsubscribe(project, topic: topic, fids: fids)])
        }
    }

    /// The topics an installation is subscribed to, sorted.
    public func topics(of address: RegistrationAddress, in project: ProjectID = .default) throws(FanoutError) -> [TopicName] {
        try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in try state.topics(of: address) }
    }

    public func subscriberCount(of topic: TopicName, in project: ProjectID = .default) throws(FanoutError) -> Int {
        try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in
            state.topics.subscriberCount(of: topic)
        }
    }

    /// Every topic with at least one subscriber, with its subscriber count, sorted by name.
    public func listTopics(in project: ProjectID = .default) throws(FanoutError) -> [(name: TopicName, subscribers: Int)] {
        try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in state.topics.allTopics() }
    }

    // MARK: - Audiences

    /// The slots subscribed to `topic`.
    public func audience(of topic: TopicName, in project: ProjectID = .default) throws(FanoutError) -> SlotSet {
        try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in
            state.topics.subscribers(of: topic)
        }
    }

    /// The slots a condition selects; `!` is relative to every installation of the project.
    public func audience(of condition: Condition, in project: ProjectID = .default) throws(FanoutError) -> SlotSet {
        let topics = condition.topics
        let (sets, all) = try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in
            var sets: [TopicName: SlotSet] = [:]
            for topic in topics { sets[topic] = state.topics.subscribers(of: topic) }
            return (sets, state.registry.liveSlots)
        }
        return condition.evaluate(topic: { sets[$0] ?? SlotSet() }, all: { all })
    }

    /// The slots of a user's devices.
    public func audience(of user: UserID, in project: ProjectID = .default) throws(FanoutError) -> SlotSet {
        try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in
            SlotSet(state.deviceSlots(of: user))
        }
    }

    // MARK: - Helpers

    // MARK: - Waiting without blocking

    /// Where `durably` collects the LSN its operations must wait for.
    final class PendingAcknowledgement: @unchecked Sendable {
        // Safe: written and read only by the task that runs `durably`, in order.
        var ticket: WALTicket?
        /// The changes span a log failure: some may have been refused.
        var spansFailure = false

        func include(_ ticket: WALTicket) {
            guard let current = self.ticket else {
                self.ticket = ticket
                return
            }
            if current.epoch != ticket.epoch { self.spansFailure = true }
            self.ticket = WALTicket(lsn: max(current.lsn, ticket.lsn), epoch: max(current.epoch, ticket.epoch))
        }
    }

    @TaskLocal static var pendingAcknowledgement: PendingAcknowledgement?

    /// Runs engine operations without blocking the calling thread on the log: inside `body` every
    /// change is applied and logged but returns at once; `durably` then suspends the task until all
    /// of them are as durable as the engine's durability says, and returns `body`'s result. For
    /// servers on event loops or Swift concurrency: many callers, no thread waiting per caller.
    ///
    /// ```swift
    /// let result = try await engine.durably { try engine.subscribe(tokens, to: topic) }
    /// ```
    /// Other callers may see the changes before `durably` returns (as with the blocking calls).
    /// Tasks started inside `body` are not covered. Changes made before `body` throws are still
    /// waited for, then its error is thrown.
    /// - Throws: what `body` throws, or `UNAVAILABLE` when the log fails before the changes are durable.
    public func durably<Result: Sendable>(_ body: () throws -> Result) async throws -> Result {
        try await self.apply(body).durable()
    }

    /// The first half of `durably`: runs `body` at once, its changes applied and logged, and
    /// returns without waiting for the log. `durable()` on the result then waits. A server uses it
    /// to apply a connection's pipelined requests in order while their syncs overlap.
    public func apply<Result: Sendable>(_ body: () throws -> Result) -> Applied<Result> {
        let pending = PendingAcknowledgement()
        let outcome = Self.$pendingAcknowledgement.withValue(pending) { () -> Swift.Result<Result, any Error> in
            Swift.Result { try body() }
        }
        return Applied(engine: self, outcome: outcome, ticket: pending.ticket, spansFailure: pending.spansFailure)
    }

    /// Changes applied by `Engine.apply` whose log records may not be durable yet.
    public struct Applied<Result: Sendable>: Sendable {
        let engine: Engine
        let outcome: Swift.Result<Result, any Error>
        let ticket: WALTicket?
        let spansFailure: Bool

        /// Whether there is nothing to wait for (no change was logged).
        public var isDurable: Bool { self.ticket == nil || self.engine.wal == nil }

        /// Waits until the changes are as durable as the engine's durability says, then returns
        /// the body's result or throws its error.
        /// - Throws: what the body threw, or `UNAVAILABLE` when the log failed first.
        public func durable() async throws -> Result {
            if !self.isDurable, let wal = self.engine.wal, let ticket = self.ticket {
                guard !self.spansFailure else {
                    throw FanoutError(.unavailable, "the write-ahead log failed while these changes were made; some were refused")
                }
                try await wal.acknowledgement(of: ticket)
            }
            return try self.outcome.get()
        }
    }

    /// Runs a change under the project's lock and queues its log records there; waits for them to
    /// be durable after releasing the lock (or leaves that to `durably`).
    func mutate<Result: Sendable>(
        _ id: ProjectID,
        _ body: (inout ProjectState) throws(FanoutError) -> (Result, [WALRecord])
    ) throws(FanoutError) -> Result {
        let (result, lsn) = try self.withProject(id) { (state: inout ProjectState) throws(FanoutError) -> (Result, WALTicket?) in
            if let wal = self.wal {
                try wal.checkHealthy()
            }
            let (result, records) = try body(&state)
            guard let wal = self.wal, !records.isEmpty else { return (result, nil) }
            return (result, try wal.append(records))
        }
        try self.awaitLog(lsn)
        return result
    }

    /// Waits until the records before `lsn` are durable, or, inside `durably`, leaves that to it.
    private func awaitLog(_ lsn: WALTicket?) throws(FanoutError) {
        guard let lsn else { return }
        if let pending = Self.pendingAcknowledgement {
            pending.include(lsn)
        } else {
            try self.wal?.waitUntilAcknowledged(lsn)
        }
    }

    func withProject<Result: Sendable>(
        _ id: ProjectID,
        _ body: (inout ProjectState) throws(FanoutError) -> Result
    ) throws(FanoutError) -> Result {
        try self.checkNotHalted()
        guard let box = self.projects.withLock({ $0[id] }) else {
            throw .notFound("no project \(id)", field: "project")
        }
        return try box.state.withLock { (state: inout ProjectState) throws(FanoutError) -> Result in
            try body(&state)
        }
    }

    private func checkNotHalted() throws(FanoutError) {
        guard self.isHalted.load(ordering: .acquiring) else { return }
        if let error = self.halted.withLock({ $0 }) { throw error }
    }

    /// After a log failure, before any caller hears of it: replaces every project's state with the
    /// one rebuilt from the records before `lsn` (all that is durable), so that no read shows a
    /// change the log refused. Consumers are detached (their deliveries wait again). If the state
    /// cannot be rebuilt, the engine halts: every call fails until the process restarts.
    func rebuildState(through lsn: UInt64) {
        guard let directory = self.directory else { return }
        let rebuilt: [ProjectID: ProjectState]
        do {
            rebuilt = try self.fileMaintenance.withLock { _ throws(FanoutError) in
                try Self.replayLog(in: directory, configuration: self.configuration, logger: self.logger, through: lsn).projects
            }
        } catch {
            let failure = FanoutError(.unavailable, "the engine halted: after a log failure its state could not be rebuilt from the log (\(error)); restart the process")
            self.halted.withLock { $0 = failure }
            self.isHalted.store(true, ordering: .releasing)
            self.logger.critical("the engine halted: its state could not be rebuilt after a log failure", metadata: ["error": "\(error)"])
            return
        }
        self.projects.withLock { projects in
            for (id, box) in projects {
                box.state.withLock { state in
                    state.finishConsumers()
                    if var replacement = rebuilt[id] {
                        replacement.deliveries.counters = state.deliveries.counters
                        state = replacement
                    }
                }
                if rebuilt[id] == nil { projects[id] = nil }
            }
            for (id, state) in rebuilt where projects[id] == nil {
                projects[id] = ProjectBox(state)
            }
        }
        self.logger.warning("the engine's state was rebuilt from the durable log; refused changes are gone", metadata: ["lsn": "\(lsn)"])
    }
}
