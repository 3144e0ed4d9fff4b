import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The fanout engine: the one facade that owns every project's installations, users and topics.
///
/// Thread-safe. Each project has its own lock, held only for in-memory work (never across I/O),
/// so projects never contend with each other. `audience(of:)` copies the subscriber sets it needs
/// under the lock (copy-on-write retains) and does the set algebra after releasing it; a send
/// resolves its audience under the lock, where it enqueues the deliveries.
///
/// Opened on a directory (`init(directory:durability:configuration:clock:)`), every change is a
/// record in the write-ahead log: it is appended under the project lock (so the log order is the
/// order of application), and the `async` calls return once it is as durable as `durability`
/// says (`apply` applies now and leaves the wait to the caller). Reads see changes as soon as
/// they are applied; consumers receive a delivery only once the change that made it is durable.
/// `init(configuration:clock:)` is the same engine in memory only.
public final class Engine: Sendable {
    final class ProjectBox: Sendable {
        let state: Locked<ProjectState>

        init(_ state: ProjectState) {
            self.state = Locked(state)
        }
    }

    public let configuration: EngineConfiguration
    /// Where the engine reads the time.
    public let clock: any WallClock
    let projects: Locked<[ProjectID: ProjectBox]>
    /// Where changes go (nil for an in-memory engine, which logs nothing).
    let log: (any ChangeLog)?
    /// The log when it is a data directory's write-ahead log (snapshots and file maintenance).
    let wal: WALWriter?
    /// The data directory, when the engine is durable.
    let directory: String?
    /// The `flock` on the data directory (released by `close`).
    private let directoryLock: Mutex<Int32?>
    /// Whether the engine holds its data directory (opened on one, and not closed).
    var holdsItsDirectory: Bool { self.directoryLock.withLock { $0 != nil } }
    /// Whether a data directory's engine was closed (an in-memory one never is).
    package var isClosed: Bool { self.directory != nil && !self.holdsItsDirectory }

    /// Whether `error` is this engine's refusal because it was closed (a cluster node's shard it
    /// stopped owning): `UNAVAILABLE` with the log healthy, refused before anything was applied.
    /// (A log that failed may have published what it refused.)
    package func refusedAsClosed(_ error: FanoutError) -> Bool {
        error.code == .unavailable && self.isClosed && self.logFailure == nil
    }

    /// Whether `error` is this engine's refusal of a consumer's attach because it was closed (its
    /// shard moved). An attach changes nothing, so this holds even after the log failed, which
    /// `refusedAsClosed` leaves out.
    package func refusedAttachAsClosed(_ error: FanoutError) -> Bool {
        error.code == .unavailable && self.isClosed
    }

    /// What recovery found when the engine was opened on a directory.
    public let recovery: RecoveryReport?
    /// The engine's swift-metrics handles (and the factory that made them).
    public let metrics: EngineMetrics
    let logger: Logger
    /// Set when the state could not be rebuilt from the log after a log failure: every call then
    /// fails rather than answer from a state that may hold refused changes.
    let halted = Mutex<FanoutError?>(nil)
    private let isHalted = Atomic<Bool>(false)
    /// Held while files are removed after a snapshot and while the state is rebuilt from them.
    let fileMaintenance = Mutex(())
    /// Held for the whole of a snapshot, and by `close` while it releases the directory: a
    /// closing engine waits for the snapshot being written, and no snapshot starts once the engine
    /// closed (another engine may have opened the directory since).
    let snapshotting = Mutex(())
    /// Deliveries handed to consumers, waiting until the changes that made them are durable.
    let handOuts = HandOutQueue()

    /// An in-memory engine with only the default project.
    public convenience init(
        configuration: EngineConfiguration = EngineConfiguration(),
        clock: any WallClock = SystemWallClock(),
        metrics: EngineMetrics = EngineMetrics()
    ) {
        self.init(log: nil, configuration: configuration, clock: clock, metrics: metrics)
    }

    /// An engine with only the default project whose changes go to `log` (an `InMemoryChangeLog` in
    /// tests; a replicated log later). Nothing is replayed from it.
    package convenience init(log: any ChangeLog, configuration: EngineConfiguration = EngineConfiguration(), clock: any WallClock = SystemWallClock()) {
        self.init(log: Optional(log), configuration: configuration, clock: clock, metrics: EngineMetrics())
    }

    private init(log: (any ChangeLog)?, configuration: EngineConfiguration, clock: any WallClock, metrics: EngineMetrics) {
        self.configuration = configuration
        self.clock = clock
        self.projects = Locked([.default: ProjectBox(ProjectState(id: .default, configuration: configuration))])
        self.log = log
        self.wal = nil
        self.directory = nil
        self.directoryLock = Mutex(nil)
        self.recovery = nil
        self.metrics = metrics
        self.logger = Logger(label: "fanout")
        if let log { self.observe(log) }
    }

    init(
        configuration: EngineConfiguration,
        clock: any WallClock,
        projects: [ProjectID: ProjectState],
        log: any ChangeLog,
        wal: WALWriter,
        directory: String,
        directoryLock: Int32,
        recovery: RecoveryReport,
        metrics: EngineMetrics,
        logger: Logger
    ) {
        self.configuration = configuration
        self.clock = clock
        self.projects = Locked(projects.mapValues { ProjectBox($0) })
        self.log = log
        self.wal = wal
        self.directory = directory
        self.directoryLock = Mutex(directoryLock)
        self.recovery = recovery
        self.metrics = metrics
        self.logger = logger
        self.observe(log)
    }

    /// Hands out what waited for each acknowledgement; rebuilds the state after a failure.
    private func observe(_ log: any ChangeLog) {
        log.setHandlers(
            acknowledged: { [weak self] acknowledged in self?.handOuts.release(through: acknowledged) },
            failed: { [weak self] lsn in self?.rebuildState(through: lsn) }
        )
    }

    /// What the write-ahead log has done since the engine opened (nil in memory).
    public var logStatistics: WALStatistics? {
        self.log?.currentStatistics
    }

    /// Why changes are refused now: the log failed (a full disk, an I/O error) and has not yet
    /// continued, or the engine halted. Nil while changes are accepted (and for an in-memory engine).
    /// For health checks; the failure itself is logged once, at error level.
    public var logFailure: FanoutError? {
        self.halted.withLock { $0 } ?? self.log?.currentFailure
    }

    /// Flushes and syncs the log and releases the data directory. Changes after this fail with
    /// `UNAVAILABLE` (reads still answer from memory). A no-op for an in-memory engine.
    public func close() throws(FanoutError) {
        guard let log = self.log else { return }
        let descriptor = self.snapshotting.withLock { _ in
            self.directoryLock.withLock { lock -> Int32? in
                defer { lock = nil }
                return lock
            }
        }
        // Only the first close of a data directory's engine does anything.
        if self.directory != nil && descriptor == nil { return }
        defer { if let descriptor { Glibc.close(descriptor) } }
        self.finishConsumers()
        try log.close()
    }

    // MARK: - Projects

    /// Creates a project; returns once it is durable. - Throws: `ALREADY_EXISTS`.
    public func createProject(_ id: ProjectID) async throws(FanoutError) {
        try await self.apply { (changes: inout Changes) throws(FanoutError) in try changes.createProject(id) }.durable()
    }

    /// The projects, sorted.
    public func projectIDs() -> [ProjectID] {
        self.projects.withLock { $0.keys.sorted() }
    }

    /// Deletes a project and everything in it. The default project cannot be deleted.
    /// - Throws: `NOT_FOUND`, or `FAILED_PRECONDITION` for the default project.
    public func deleteProject(_ id: ProjectID) async throws(FanoutError) {
        try await self.apply { (changes: inout Changes) throws(FanoutError) in try changes.deleteProject(id) }.durable()
    }

    // MARK: - Installations

    /// Registers an installation; the engine assigns the FID when the offered one is missing,
    /// invalid, taken or retired. Repeating a registration (a retry after a lost reply) answers
    /// the existing installation with `isExisting` set and changes nothing.
    @discardableResult
    public func register(_ request: RegistrationRequest, in project: ProjectID = .default) async throws(FanoutError) -> RegistrationResult {
        try await self.apply { (changes: inout Changes) throws(FanoutError) in try changes.register(request, in: project) }.durable()
    }

    /// Registers installations in one go (see `Engine.Changes.register(_:in:)`): each on its own,
    /// results in input order, one lock acquisition and one log append for all.
    public func register(
        _ requests: [RegistrationRequest],
        in project: ProjectID = .default
    ) async throws(FanoutError) -> [Result<RegistrationResult, FanoutError>] {
        var items = RegistrationItems()
        items.reserveCapacity(requests.count)
        for request in requests { items.append(request) }
        return try await self.apply { (changes: inout Changes) throws(FanoutError) in try changes.register(items, in: project) }.durable()
    }

    /// Rotates an installation's token: the old one is `UNREGISTERED` from now on; topics stay.
    @discardableResult
    public func refreshToken(
        _ address: RegistrationAddress,
        to token: RegistrationToken,
        in project: ProjectID = .default
    ) async throws(FanoutError) -> Installation {
        try await self.apply { (changes: inout Changes) throws(FanoutError) in try changes.refreshToken(address, to: token, in: project) }.durable()
    }

    /// Records that the installation was seen now.
    @discardableResult
    public func touch(_ address: RegistrationAddress, in project: ProjectID = .default) async throws(FanoutError) -> Installation {
        try await self.apply { (changes: inout Changes) throws(FanoutError) in try changes.touch(address, in: project) }.durable()
    }

    /// Sets an iOS installation's APNs device token, or clears it with `nil`. A token belongs to at
    /// most one installation of a project: taking one another installation has moves it here (FCM's
    /// APNs token mapping).
    /// - Throws: `INVALID_ARGUMENT` (field `apnsToken`) for an installation that is not iOS;
    ///   `NOT_FOUND` / `UNREGISTERED` for an unknown installation.
    @discardableResult
    public func setAPNsToken(_ token: APNsDeviceToken?, of address: RegistrationAddress, in project: ProjectID = .default) async throws(FanoutError) -> Installation {
        try await self.apply { (changes: inout Changes) throws(FanoutError) in try changes.setAPNsToken(token, of: address, in: project) }.durable()
    }

    /// The installation an APNs device token belongs to.
    /// - Throws: `NOT_FOUND` (field `apnsToken`) when no installation of the project has it.
    public func installation(forAPNsToken token: APNsDeviceToken, in project: ProjectID = .default) throws(FanoutError) -> Installation {
        try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in
            try state.installation(forAPNsToken: token)
        }
    }

    /// The live installation with this FID and the SHA-256 of its refresh token; nil when it was
    /// deleted, never existed, has no credentials, or the project does not exist.
    public func credential(of fid: FID, in project: ProjectID) -> (installation: Installation, digest: [UInt8])? {
        try? self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in state.credential(of: fid) }
    }

    public func installation(_ address: RegistrationAddress, in project: ProjectID = .default) throws(FanoutError) -> Installation {
        try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in
            try state.installation(address)
        }
    }

    /// Which of `tokens` this engine knows in `project` (registered now, or once and retired), in
    /// order, under one lock for all of them; none in a project it does not have. (A cluster node
    /// finds a token's shard this way, docs/scale-out.md.)
    package func knows(_ tokens: [RegistrationToken], in project: ProjectID) -> [Bool] {
        let addresses = tokens.map(RegistrationAddress.token)
        let batch = RegistrationBatch(addresses)
        let known = try? self.withProject(project) { (state: inout ProjectState) -> [Bool] in
            zip(addresses, state.registry.slots(for: batch)).map { address, slot in slot != nil || state.isRetired(address) }
        }
        return known ?? Array(repeating: false, count: tokens.count)
    }

    /// The installation in `slot`, if that slot is live (slots come from audience resolution).
    package func installation(atSlot slot: UInt32, in project: ProjectID = .default) throws(FanoutError) -> Installation? {
        try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in
            state.registry.installation(atSlot: slot)
        }
    }

    /// Deletes an installation with its token, subscriptions, user binding and mailbox; returns
    /// what it was.
    @discardableResult
    public func deleteInstallation(_ fid: FID, in project: ProjectID = .default) async throws(FanoutError) -> Installation {
        try await self.apply { (changes: inout Changes) throws(FanoutError) in try changes.deleteInstallation(fid, in: project) }.durable()
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
    public func pruneExpiredInstallations(in project: ProjectID = .default) async throws(FanoutError) -> [Installation] {
        try await self.apply { (changes: inout Changes) throws(FanoutError) in try changes.pruneExpiredInstallations(in: project) }.durable()
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
    ) async throws(FanoutError) -> Installation {
        try await self.apply { (changes: inout Changes) throws(FanoutError) in try changes.bindDevice(address, to: user, anonymous: anonymous, in: project) }.durable()
    }

    /// Signs a user out of one device: unbinds it and drops its token before returning.
    /// - Throws: `FAILED_PRECONDITION` when the device is bound to another user.
    @discardableResult
    public func signOut(
        _ user: UserID,
        on address: RegistrationAddress,
        in project: ProjectID = .default
    ) async throws(FanoutError) -> Installation {
        try await self.apply { (changes: inout Changes) throws(FanoutError) in try changes.signOut(user, on: address, in: project) }.durable()
    }

    /// Links an anonymous user to a permanent one, which takes over the devices.
    @discardableResult
    public func linkUser(
        anonymous: UserID,
        to permanent: UserID,
        in project: ProjectID = .default
    ) async throws(FanoutError) -> User {
        try await self.apply { (changes: inout Changes) throws(FanoutError) in try changes.linkUser(anonymous: anonymous, to: permanent, in: project) }.durable()
    }

    /// A user with their devices. - Throws: `NOT_FOUND`.
    public func user(_ id: UserID, in project: ProjectID = .default) throws(FanoutError) -> User {
        try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in try state.user(id) }
    }

    /// Removes the anonymous users created more than `anonymousUserLifetime` ago (for users older
    /// than the project's automatic clean-up, counted from when it was turned on), as Firebase Auth
    /// does; their devices stay, unbound. Returns them, sorted.
    @discardableResult
    public func cleanUpAnonymousUsers(in project: ProjectID = .default) async throws(FanoutError) -> [UserID] {
        try await self.apply { (changes: inout Changes) throws(FanoutError) in try changes.cleanUpAnonymousUsers(in: project) }.durable()
    }

    /// The anonymous users `cleanUpAnonymousUsers` would remove now (a dry run), sorted.
    public func anonymousUsersDueForCleanUp(in project: ProjectID = .default) throws(FanoutError) -> [UserID] {
        let now = self.clock.now()
        return try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in state.anonymousUsersDue(now: now) }
    }

    /// Turns the project's automatic anonymous clean-up on or off (off by default). While on, the
    /// server's maintenance removes anonymous users `anonymousUserLifetime` after their creation;
    /// users created before it was turned on count from then. Returns since when it is on (turning
    /// it on again keeps the first time), or `nil`.
    @discardableResult
    public func setAnonymousCleanUp(_ enabled: Bool, in project: ProjectID = .default) async throws(FanoutError) -> Timestamp? {
        try await self.apply { (changes: inout Changes) throws(FanoutError) in try changes.setAnonymousCleanUp(enabled, in: project) }.durable()
    }

    /// Lets a project accept legacy 11-character Instance IDs as FIDs, as apps migrated from
    /// Instance ID offer them (off by default): in registrations' offered FIDs and in sends' `fid`
    /// and `fids`. Installations registered with one stay addressable when it is turned off again.
    public func setLegacyInstanceIDs(_ accepted: Bool, in project: ProjectID = .default) async throws(FanoutError) -> Bool {
        try await self.apply { (changes: inout Changes) throws(FanoutError) in try changes.setLegacyInstanceIDs(accepted, in: project) }.durable()
    }

    /// Whether the project accepts legacy Instance IDs.
    public func acceptsLegacyInstanceIDs(in project: ProjectID = .default) throws(FanoutError) -> Bool {
        try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in state.acceptsLegacyInstanceIDs }
    }

    /// Since when the project's automatic anonymous clean-up is on, or `nil` when it is off.
    public func anonymousCleanUpEnabledAt(in project: ProjectID = .default) throws(FanoutError) -> Timestamp? {
        try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in
            state.anonymousCleanupEnabledAt.map(Timestamp.init(millisecondsSinceEpoch:))
        }
    }

    /// The project's users in id order after `startAfter`, at most `limit`, with their devices.
    public func users(after startAfter: UserID? = nil, limit: Int = 1000, in project: ProjectID = .default) throws(FanoutError) -> [User] {
        try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in state.users(after: startAfter, limit: limit) }
    }

    // MARK: - Topics

    /// Subscribes up to 1000 installations to `topic`; one result per installation, in input order
    /// (`NOT_FOUND`, `UNREGISTERED` for a rotated or deleted one, `TOO_MANY_TOPICS`). Subscribing
    /// twice is not an error. (Strings from a request that may be either go in a
    /// `RegistrationList` to the overload that takes one, which answers `INVALID_ARGUMENT` for
    /// those that are neither.)
    /// - Throws: `INVALID_ARGUMENT` for more than `maximumBatchSize` registrations (nothing applied).
    @discardableResult
    public func subscribe(
        _ registrations: [RegistrationAddress],
        to topic: TopicName,
        in project: ProjectID = .default
    ) async throws(FanoutError) -> [BatchItemResult] {
        try await self.apply { (changes: inout Changes) throws(FanoutError) in try changes.subscribe(registrations, to: topic, in: project) }.durable()
    }

    /// Subscribes up to 1000 installations, each named by a string that is a FID or a token (as a
    /// request carries them), to `topic`: as `subscribe(_:to:in:)`, with `INVALID_ARGUMENT` for
    /// a registration that is neither.
    @discardableResult
    public func subscribe(
        _ registrations: RegistrationList,
        to topic: TopicName,
        in project: ProjectID = .default
    ) async throws(FanoutError) -> [BatchItemResult] {
        try await self.apply { (changes: inout Changes) throws(FanoutError) in try changes.subscribe(registrations, to: topic, in: project) }.durable()
    }

    /// Unsubscribes up to 1000 installations from `topic`; one result per installation.
    @discardableResult
    public func unsubscribe(
        _ registrations: [RegistrationAddress],
        from topic: TopicName,
        in project: ProjectID = .default
    ) async throws(FanoutError) -> [BatchItemResult] {
        try await self.apply { (changes: inout Changes) throws(FanoutError) in try changes.unsubscribe(registrations, from: topic, in: project) }.durable()
    }

    /// Unsubscribes up to 1000 installations, each named by a FID or a token, from `topic`;
    /// `INVALID_ARGUMENT` for a registration that is neither.
    @discardableResult
    public func unsubscribe(
        _ registrations: RegistrationList,
        from topic: TopicName,
        in project: ProjectID = .default
    ) async throws(FanoutError) -> [BatchItemResult] {
        try await self.apply { (changes: inout Changes) throws(FanoutError) in try changes.unsubscribe(registrations, from: topic, in: project) }.durable()
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

    /// The installations subscribed to `topic`.
    public func audience(of topic: TopicName, in project: ProjectID = .default) throws(FanoutError) -> Audience {
        try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in
            Audience(state.topics.subscribers(of: topic))
        }
    }

    /// The installations a condition selects; `!` is relative to every installation of the project.
    public func audience(of condition: Condition, in project: ProjectID = .default) throws(FanoutError) -> Audience {
        let topics = condition.topics
        let (sets, all) = try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in
            var sets: [TopicName: SlotSet] = [:]
            for topic in topics { sets[topic] = state.topics.subscribers(of: topic) }
            return (sets, state.registry.liveSlots)
        }
        return Audience(condition.evaluate(topic: { sets[$0] ?? SlotSet() }, all: { all }))
    }

    /// The installations of a user's devices.
    public func audience(of user: UserID, in project: ProjectID = .default) throws(FanoutError) -> Audience {
        try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in
            Audience(SlotSet(state.deviceSlots(of: user)))
        }
    }

    // MARK: - Helpers

    func withProject<Result: Sendable>(
        _ id: ProjectID,
        _ body: (inout ProjectState) throws(FanoutError) -> Result
    ) throws(FanoutError) -> Result {
        try self.checkNotHalted()
        guard let box = self.projects.withLock({ $0[id] }) else {
            throw .notFound("no project \(id)", field: "project")
        }
        var handedOut = false
        defer {
            // After the lock: push what the change handed out, as far as the log has acknowledged.
            if handedOut { self.handOuts.release(through: self.log?.acknowledgedTicket ?? Self.everythingAcknowledged) }
        }
        return try box.state.withLock { (state: inout ProjectState) throws(FanoutError) -> Result in
            let (counted, pending) = (state.deliveries.counters, state.deliveries.mailboxes.count)
            defer {
                self.metrics.record(from: counted, to: state.deliveries.counters, pending: (pending, state.deliveries.mailboxes.count), in: id)
                if !state.deliveries.handOuts.isEmpty {
                    // Queued under the lock, so one consumer gets them in the order they were made,
                    // behind every record appended so far; when this change made none of their
                    // deliveries (an acknowledgement's refill), not behind its own records.
                    var ticket = self.log?.nextRecordLSN ?? Self.everythingAcknowledged
                    if !state.deliveries.handsOutNewDeliveries { ticket.lsn -= UInt64(state.deliveries.recordsOfThisChange) }
                    for index in state.deliveries.handOuts.indices { state.deliveries.handOuts[index].build() }
                    self.handOuts.enqueue(state.deliveries.handOuts, after: ticket)
                    state.deliveries.handOuts.removeAll(keepingCapacity: true)
                    handedOut = true
                }
                state.deliveries.handsOutNewDeliveries = false
                state.deliveries.recordsOfThisChange = 0
            }
            return try body(&state)
        }
    }

    /// The position an in-memory engine's hand-outs wait for, and what it has acknowledged: all.
    private static let everythingAcknowledged = LogTicket(lsn: 0, epoch: 0)

    func checkNotHalted() throws(FanoutError) {
        guard self.isHalted.load(ordering: .acquiring) else { return }
        if let error = self.halted.withLock({ $0 }) { throw error }
    }

    /// After a log failure, before any caller hears of it: replaces every project's state with the
    /// one rebuilt from the records before `lsn` (all that is durable), so that no read shows a
    /// change the log refused. Consumers are detached (their deliveries wait again). If the state
    /// cannot be rebuilt, the engine halts: every call fails until the process restarts.
    func rebuildState(through lsn: UInt64) {
        guard let directory = self.directory else { return }
        // What waits for the log was made by changes it refused, or for consumers now detached.
        self.handOuts.removeAll()
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
