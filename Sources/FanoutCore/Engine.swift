import Synchronization

/// The fanout engine: the one facade that owns every project's installations, users and topics.
///
/// Thread-safe. Each project has its own lock, held only for in-memory work (never across I/O),
/// so projects never contend with each other. Audience resolution copies the subscriber sets it
/// needs under the lock (copy-on-write retains) and does the set algebra after releasing it.
///
/// This is the in-memory engine; durability (the write-ahead log) wraps these same operations.
public final class Engine: Sendable {
    private final class ProjectBox: Sendable {
        let state: Mutex<ProjectState>

        init(_ state: ProjectState) {
            self.state = Mutex(state)
        }
    }

    public let configuration: EngineConfiguration
    private let clock: any WallClock
    private let projects: Mutex<[ProjectID: ProjectBox]>

    /// An engine with only the default project.
    public init(configuration: EngineConfiguration = EngineConfiguration(), clock: any WallClock = SystemWallClock()) {
        self.configuration = configuration
        self.clock = clock
        self.projects = Mutex([.default: ProjectBox(ProjectState(id: .default, configuration: configuration))])
    }

    // MARK: - Projects

    /// Creates a project. - Throws: `ALREADY_EXISTS`.
    public func createProject(_ id: ProjectID) throws(FanoutError) {
        try self.projects.withLock { (projects: inout [ProjectID: ProjectBox]) throws(FanoutError) in
            guard projects[id] == nil else {
                throw FanoutError(.alreadyExists, "project \(id) exists", field: "project")
            }
            projects[id] = ProjectBox(ProjectState(id: id, configuration: self.configuration))
        }
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
        try self.projects.withLock { (projects: inout [ProjectID: ProjectBox]) throws(FanoutError) in
            guard projects.removeValue(forKey: id) != nil else {
                throw .notFound("no project \(id)", field: "project")
            }
        }
    }

    // MARK: - Installations

    /// Registers an installation; the engine assigns the FID when the offered one is missing,
    /// invalid, taken or retired.
    public func register(_ request: RegistrationRequest, in project: ProjectID = .default) throws(FanoutError) -> RegistrationResult {
        let now = self.clock.now()
        return try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in
            try state.register(request, now: now)
        }
    }

    /// Rotates an installation's token: the old one is `UNREGISTERED` from now on; topics stay.
    public func refreshToken(
        _ address: RegistrationAddress,
        to token: RegistrationToken,
        in project: ProjectID = .default
    ) throws(FanoutError) -> Installation {
        let now = self.clock.now()
        return try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in
            try state.refreshToken(address, to: token, now: now)
        }
    }

    /// Records that the installation was seen now.
    @discardableResult
    public func touch(_ address: RegistrationAddress, in project: ProjectID = .default) throws(FanoutError) -> Installation {
        let now = self.clock.now()
        return try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in
            try state.touch(address, now: now)
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
        try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in
            try state.delete(fid)
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
        return try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in
            state.pruneExpired(now: now)
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
        return try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in
            try state.bind(address, to: user, anonymous: anonymous, now: now)
        }
    }

    /// Signs a user out of one device: unbinds it and drops its token before returning.
    @discardableResult
    public func signOut(
        _ user: UserID,
        on address: RegistrationAddress,
        in project: ProjectID = .default
    ) throws(FanoutError) -> Installation {
        try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in
            try state.signOut(user, on: address)
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
        return try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in
            try state.link(anonymous: anonymous, to: permanent, now: now)
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
        return try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in
            state.cleanUpAnonymousUsers(now: now)
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
        try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in
            try state.subscribe(registrations, to: topic)
        }
    }

    /// Unsubscribes up to 1000 registrations from `topic`; one result per registration.
    public func unsubscribe(
        _ registrations: [String],
        from topic: TopicName,
        in project: ProjectID = .default
    ) throws(FanoutError) -> [BatchItemResult] {
        try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in
            try state.unsubscribe(registrations, from: topic)
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

    private func withProject<Result: Sendable>(
        _ id: ProjectID,
        _ body: (inout ProjectState) throws(FanoutError) -> Result
    ) throws(FanoutError) -> Result {
        guard let box = self.projects.withLock({ $0[id] }) else {
            throw .notFound("no project \(id)", field: "project")
        }
        return try box.state.withLock { (state: inout ProjectState) throws(FanoutError) -> Result in
            try body(&state)
        }
    }
}
