extension Engine {
    /// Applies changes now and leaves waiting for the log to the caller: `body` runs at once, each
    /// change it makes through `changes` is applied (other callers see it) and queued in the log,
    /// and `Applied.durable()` later waits until all of them are as durable as the engine's
    /// durability says. A server applies a connection's pipelined requests in order this way while
    /// their syncs overlap; the `async` methods on `Engine` are `apply` followed by `durable()`.
    ///
    /// ```swift
    /// let applied = engine.apply { changes in try changes.subscribe(tokens, to: topic) }
    /// // ... apply more, then:
    /// let results = try await applied.durable()
    /// ```
    /// Changes made before `body` throws are still waited for, then its error is thrown.
    ///
    /// Inlinable, with `Applied`'s members, so that a caller's `Result` type is specialized: run
    /// generic, every request of a server looked up `Applied<ServerMessage>`'s metadata and copied
    /// its results through value witnesses, on the event loop and on the log's writer thread.
    @inlinable
    public func apply<Result: Sendable>(_ body: (inout Changes) throws(FanoutError) -> Result) -> Applied<Result> {
        var changes = Changes(engine: self)
        let outcome: Swift.Result<Result, FanoutError>
        do {
            outcome = .success(try body(&changes))
        } catch {
            outcome = .failure(error)
        }
        return Applied(engine: self, outcome: outcome, ticket: changes.ticket, spansFailure: changes.spansFailure)
    }

    /// `Applied.whenDurable` without its result: calls `done` with nil once `ticket` is as durable
    /// as the engine's durability says (at once without a ticket or a log), after the deliveries
    /// handed out behind it are released, or with why the log refused it.
    @usableFromInline
    func whenDurable(_ ticket: LogTicket?, spansFailure: Bool, _ done: @escaping @Sendable (FanoutError?) -> Void) {
        guard let ticket, let log = self.log else { return done(nil) }
        guard !spansFailure else { return done(Self.spannedLogFailure) }
        log.whenAcknowledged(ticket) { refusal in
            if refusal == nil { self.handOut(after: log) }
            done(refusal)
        }
    }

    /// The deliveries changes handed out reach their consumers before the changes' caller hears
    /// back (the log's writer may not have pushed them yet).
    fileprivate func handOut(after log: any ChangeLog) {
        self.handOuts.release(through: log.acknowledgedTicket)
    }

    fileprivate static var spannedLogFailure: FanoutError {
        FanoutError(.unavailable, "the write-ahead log failed while these changes were made; some were refused")
    }

    /// Changes applied by `Engine.apply` whose log records may not be durable yet.
    public struct Applied<Result: Sendable>: Sendable {
        @usableFromInline let engine: Engine
        /// The body's result or error, to be read once `isDurable` (borrowed where it is read:
        /// `completedResult` is a copy, a dozen references for a result holding an installation).
        public let outcome: Swift.Result<Result, FanoutError>
        @usableFromInline let ticket: LogTicket?
        @usableFromInline let spansFailure: Bool

        @usableFromInline
        init(engine: Engine, outcome: Swift.Result<Result, FanoutError>, ticket: LogTicket?, spansFailure: Bool) {
            self.engine = engine
            self.outcome = outcome
            self.ticket = ticket
            self.spansFailure = spansFailure
        }

        /// Whether there is nothing to wait for (no change was logged).
        @inlinable
        public var isDurable: Bool { self.ticket == nil }

        /// Waits (suspending, blocking no thread) until the changes are as durable as the engine's
        /// durability says, then returns the body's result or throws its error.
        /// - Throws: what the body threw, or `UNAVAILABLE` when the log failed first.
        public func durable() async throws(FanoutError) -> Result {
            if let ticket = self.ticket, let log = self.engine.log {
                guard !self.spansFailure else { throw Engine.spannedLogFailure }
                try await log.acknowledgement(of: ticket)
                self.engine.handOut(after: log)
            }
            return try self.outcome.get()
        }

        /// The body's result or error when nothing waits for the log (`isDurable`); nil otherwise.
        @inlinable
        public var completedResult: Swift.Result<Result, FanoutError>? {
            self.isDurable ? self.outcome : nil
        }

        /// `durable()` for callers on an event loop: calls `completion` with the body's result or
        /// error once the changes are as durable as the engine's durability says, at once when
        /// that is known now, else on the log's writer thread with no engine lock held. It must
        /// not block: a server hands the result to its event loop.
        @inlinable
        public func whenDurable(_ completion: @escaping @Sendable (Swift.Result<Result, FanoutError>) -> Void) {
            let outcome = self.outcome
            self.engine.whenDurable(self.ticket, spansFailure: self.spansFailure) { refusal in
                // Not `refusal.map { .failure($0) } ?? outcome`: the autoclosure copied the result.
                if let refusal {
                    completion(.failure(refusal))
                } else {
                    completion(outcome)
                }
            }
        }

        /// Where the changes stand with the log now, without waiting: nil while it has not said;
        /// `.acknowledged` once they are as durable as the engine's durability says (`outcome`
        /// stands, and the deliveries they handed out have gone ahead of it), or `.refused` with
        /// the error to answer instead. For a server that keeps its replies on its event loop and
        /// answers them in order there (`whenLogged` wakes it).
        package func logOutcome() -> LogOutcome? {
            guard let ticket = self.ticket, let log = self.engine.log else { return .acknowledged }
            guard !self.spansFailure else { return .refused(Engine.spannedLogFailure) }
            let outcome = log.outcome(of: ticket)
            if outcome == .acknowledged { self.engine.handOut(after: log) }
            return outcome
        }

        /// Calls `wake` once `logOutcome()` is not nil: at once when it is not now, else on the
        /// log's writer thread with no engine lock held. It must not block. One call covers every
        /// change applied before these: the log acknowledges in order.
        package func whenLogged(_ wake: @escaping @Sendable () -> Void) {
            guard let ticket = self.ticket, let log = self.engine.log, !self.spansFailure else { return wake() }
            log.whenAcknowledged(ticket) { _ in wake() }
        }

        /// `durable()` for callers outside Swift concurrency (scripts, tools, a crash test's child):
        /// blocks the calling thread until the changes are durable. Never call it on an event loop
        /// or from a task.
        public func blockingUntilDurable() throws(FanoutError) -> Result {
            if let ticket = self.ticket, let log = self.engine.log {
                guard !self.spansFailure else { throw Engine.spannedLogFailure }
                try log.waitUntilAcknowledged(ticket)
                self.engine.handOut(after: log)
            }
            return try self.outcome.get()
        }
    }

    /// The engine's changes, each applied at once under its project's lock with its log records
    /// queued there; what they wait for is collected here for `Applied` (see `Engine.apply`).
    public struct Changes {
        @usableFromInline let engine: Engine
        /// The log position every change so far waits for.
        @usableFromInline var ticket: LogTicket?
        /// The changes span a log failure: some may have been refused.
        @usableFromInline var spansFailure = false

        @usableFromInline
        init(engine: Engine) {
            self.engine = engine
        }

        mutating func include(_ ticket: LogTicket) {
            guard let current = self.ticket else {
                self.ticket = ticket
                return
            }
            if current.epoch != ticket.epoch { self.spansFailure = true }
            self.ticket = LogTicket(lsn: max(current.lsn, ticket.lsn), epoch: max(current.epoch, ticket.epoch))
        }

        /// Runs a change under the project's lock and queues the log records it returns there.
        mutating func mutate<Result: Sendable>(
            _ id: ProjectID,
            _ body: (inout ProjectState) throws(FanoutError) -> Logged<Result>
        ) throws(FanoutError) -> Result {
            let log = self.engine.log
            let (result, ticket) = try self.engine.withProject(id) { (state: inout ProjectState) throws(FanoutError) -> (Result, LogTicket?) in
                try log?.checkHealthy()
                let (result, records) = try body(&state)
                guard let log, !records.isEmpty else { return (result, nil) }
                let ticket = try log.queue(records)
                state.deliveries.recordsOfThisChange = records.count
                return (result, ticket)
            }
            if let ticket {
                log?.startWriting()
                self.include(ticket)
            }
            return result
        }

        // MARK: - Projects

        /// Creates a project. - Throws: `ALREADY_EXISTS`.
        public mutating func createProject(_ id: ProjectID) throws(FanoutError) {
            let configuration = self.engine.configuration
            try self.changeProjects(.createProject(id)) { (projects: inout [ProjectID: ProjectBox]) throws(FanoutError) in
                guard projects[id] == nil else {
                    throw FanoutError(.alreadyExists, "project \(id) exists", field: "project")
                }
            } apply: { projects in
                projects[id] = ProjectBox(ProjectState(id: id, configuration: configuration))
            }
        }

        /// Deletes a project and everything in it. The default project cannot be deleted.
        /// - Throws: `NOT_FOUND`, or `FAILED_PRECONDITION` for the default project.
        public mutating func deleteProject(_ id: ProjectID) throws(FanoutError) {
            guard id != .default else {
                throw FanoutError(.failedPrecondition, "the default project cannot be deleted", field: "project")
            }
            try self.changeProjects(.deleteProject(id)) { (projects: inout [ProjectID: ProjectBox]) throws(FanoutError) in
                guard projects[id] != nil else {
                    throw .notFound("no project \(id)", field: "project")
                }
            } apply: { projects in
                projects[id]?.state.withLock { $0.finishConsumers() }
                projects[id] = nil
            }
            self.engine.metrics.projectDeleted(id)
        }

        /// A change to the project map, under its lock: `check` refuses it, else `record` is logged
        /// and `apply` makes it.
        private mutating func changeProjects(
            _ record: WALRecord,
            check: (inout [ProjectID: ProjectBox]) throws(FanoutError) -> Void,
            apply: (inout [ProjectID: ProjectBox]) -> Void
        ) throws(FanoutError) {
            try self.engine.checkNotHalted()
            let log = self.engine.log
            let ticket = try self.engine.projects.withLock { (projects: inout [ProjectID: ProjectBox]) throws(FanoutError) -> LogTicket? in
                try check(&projects)
                try log?.checkHealthy()
                let ticket = try log?.queue([record])
                apply(&projects)
                return ticket
            }
            if let ticket {
                log?.startWriting()
                self.include(ticket)
            }
        }

        // MARK: - Installations

        /// Registers an installation (see `Engine.register`).
        @discardableResult
        public mutating func register(_ request: RegistrationRequest, in project: ProjectID = .default) throws(FanoutError) -> RegistrationResult {
            let now = self.engine.clock.now()
            return try self.mutate(project) { (state: inout ProjectState) throws(FanoutError) in try state.register(request, now: now) }
        }

        /// Registers an installation and gives it the credential `credential(fid)` makes (the
        /// SHA-256 of its new refresh token, for the installation's FID), both in one append to
        /// the log: a crash keeps both or neither. A repeat (an existing installation answered)
        /// gets new credentials too, unless `creatingOnly`: then it is `ALREADY_EXISTS` (field
        /// `token`, or `fid` without one) and nothing changes. `credential` runs under the
        /// project's lock.
        public mutating func register(
            _ request: RegistrationRequest,
            in project: ProjectID = .default,
            creatingOnly: Bool,
            credential: (FID) -> [UInt8]
        ) throws(FanoutError) -> RegistrationResult {
            let now = self.engine.clock.now()
            return try self.mutate(project) { (state: inout ProjectState) throws(FanoutError) in
                try state.register(request, now: now, creatingOnly: creatingOnly, credential: credential)
            }
        }

        /// Registers each installation on its own, as `register` does, under one acquisition of
        /// the project's lock and with one append to the log: a refused item changes nothing and
        /// does not stop the others. Items already refused by the caller (a field that did not
        /// parse) keep their error. Results are in input order.
        /// - Throws: only what refuses the whole batch (no such project, the log refusing changes).
        public mutating func register(
            _ requests: [Swift.Result<RegistrationRequest, FanoutError>],
            in project: ProjectID = .default
        ) throws(FanoutError) -> [Swift.Result<RegistrationResult, FanoutError>] {
            try self.register(RegistrationItems(requests), in: project)
        }

        /// Registers a batch's items as `register(_:in:)` does.
        public mutating func register(
            _ items: consuming RegistrationItems,
            in project: ProjectID = .default
        ) throws(FanoutError) -> [Swift.Result<RegistrationResult, FanoutError>] {
            var items = items
            let (additions, now) = try self.add(&items, in: project)
            var results: [Swift.Result<RegistrationResult, FanoutError>] = []
            results.reserveCapacity(additions.count)
            for index in additions.indices {
                switch additions[index] {
                case .success(let addition): results.append(.success(addition.result(of: items.requests[index], at: now)))
                case .failure(let error): results.append(.failure(error))
                }
            }
            return results
        }

        /// Registers a batch's items as `register(_:in:)` does and answers each with its FID and
        /// flags only (REGISTER_BATCH_FIDS): no installation is described.
        public mutating func registerReturningFIDs(
            _ items: consuming RegistrationItems,
            in project: ProjectID = .default
        ) throws(FanoutError) -> [RegistrationReceipt] {
            var items = items
            return try self.add(&items, in: project).additions.map { addition in
                switch addition {
                case .success(let addition): addition.receipt
                case .failure(let error): .failed(error)
                }
            }
        }

        /// What registering each item did, and when (`items` is lent to the project's state: its
        /// requests are read where it holds them, `RegistrationItems.forEachRequest`).
        private mutating func add(
            _ items: inout RegistrationItems,
            in project: ProjectID
        ) throws(FanoutError) -> (additions: [Swift.Result<InstallationRegistry.Addition, FanoutError>], now: Timestamp) {
            let now = self.engine.clock.now()
            let additions = try self.mutate(project) { (state: inout ProjectState) throws(FanoutError) in
                state.register(&items, now: now)
            }
            return (additions, now)
        }

        /// Rotates an installation's token (see `Engine.refreshToken`).
        @discardableResult
        public mutating func refreshToken(
            _ address: RegistrationAddress,
            to token: RegistrationToken,
            in project: ProjectID = .default
        ) throws(FanoutError) -> Installation {
            let now = self.engine.clock.now()
            return try self.mutate(project) { (state: inout ProjectState) throws(FanoutError) in try state.refreshToken(address, to: token, now: now) }
        }

        /// Sets or clears an installation's APNs device token (see `Engine.setAPNsToken`).
        @discardableResult
        public mutating func setAPNsToken(_ token: APNsDeviceToken?, of address: RegistrationAddress, in project: ProjectID = .default) throws(FanoutError) -> Installation {
            try self.mutate(project) { (state: inout ProjectState) throws(FanoutError) in try state.setAPNsToken(token, of: address) }
        }

        /// Gives an installation credentials: `digest` is the SHA-256 of its new refresh token.
        /// The refresh token before it, and the auth tokens issued with that, stop working.
        @discardableResult
        public mutating func setCredential(_ digest: [UInt8], of address: RegistrationAddress, in project: ProjectID = .default) throws(FanoutError) -> Installation {
            try self.mutate(project) { (state: inout ProjectState) throws(FanoutError) in try state.setCredential(digest, of: address) }
        }

        /// Records that the installation was seen now.
        @discardableResult
        public mutating func touch(_ address: RegistrationAddress, in project: ProjectID = .default) throws(FanoutError) -> Installation {
            let now = self.engine.clock.now()
            return try self.mutate(project) { (state: inout ProjectState) throws(FanoutError) in try state.touch(address, now: now) }
        }

        /// Deletes an installation (see `Engine.deleteInstallation`).
        @discardableResult
        public mutating func deleteInstallation(_ fid: FID, in project: ProjectID = .default) throws(FanoutError) -> Installation {
            try self.mutate(project) { (state: inout ProjectState) throws(FanoutError) in try state.delete(fid) }
        }

        /// Deletes installations not seen for `expireAfter`; returns them.
        @discardableResult
        public mutating func pruneExpiredInstallations(in project: ProjectID = .default) throws(FanoutError) -> [Installation] {
            let now = self.engine.clock.now()
            return try self.mutate(project) { (state: inout ProjectState) throws(FanoutError) in state.pruneExpired(now: now) }
        }

        // MARK: - Users

        /// Binds an installation to a user (see `Engine.bindDevice`).
        @discardableResult
        public mutating func bindDevice(
            _ address: RegistrationAddress,
            to user: UserID,
            anonymous: Bool = false,
            in project: ProjectID = .default
        ) throws(FanoutError) -> Installation {
            let now = self.engine.clock.now()
            return try self.mutate(project) { (state: inout ProjectState) throws(FanoutError) in
                try state.bind(address, to: user, anonymous: anonymous, now: now)
            }
        }

        /// Signs a user out of one device (see `Engine.signOut`).
        @discardableResult
        public mutating func signOut(_ user: UserID, on address: RegistrationAddress, in project: ProjectID = .default) throws(FanoutError) -> Installation {
            try self.mutate(project) { (state: inout ProjectState) throws(FanoutError) in try state.signOut(user, on: address) }
        }

        /// Links an anonymous user to a permanent one (see `Engine.linkUser`).
        @discardableResult
        public mutating func linkUser(anonymous: UserID, to permanent: UserID, in project: ProjectID = .default) throws(FanoutError) -> User {
            let now = self.engine.clock.now()
            return try self.mutate(project) { (state: inout ProjectState) throws(FanoutError) in try state.link(anonymous: anonymous, to: permanent, now: now) }
        }

        /// Removes the anonymous users due for clean-up (see `Engine.cleanUpAnonymousUsers`); returns them.
        @discardableResult
        public mutating func cleanUpAnonymousUsers(in project: ProjectID = .default) throws(FanoutError) -> [UserID] {
            let now = self.engine.clock.now()
            return try self.mutate(project) { (state: inout ProjectState) throws(FanoutError) in state.cleanUpAnonymousUsers(now: now) }
        }

        /// Whether the project accepts legacy 11-character Instance IDs as FIDs (see `Engine.setLegacyInstanceIDs`).
        @discardableResult
        public mutating func setLegacyInstanceIDs(_ accepted: Bool, in project: ProjectID = .default) throws(FanoutError) -> Bool {
            try self.mutate(project) { (state: inout ProjectState) throws(FanoutError) in state.setLegacyInstanceIDs(accepted) }
        }

        /// Turns automatic anonymous clean-up on or off (see `Engine.setAnonymousCleanUp`).
        @discardableResult
        public mutating func setAnonymousCleanUp(_ enabled: Bool, in project: ProjectID = .default) throws(FanoutError) -> Timestamp? {
            let now = self.engine.clock.now()
            return try self.mutate(project) { (state: inout ProjectState) throws(FanoutError) in state.setAnonymousCleanup(enabled ? now : nil) }
        }

        // MARK: - Topics

        /// Subscribes up to 1000 installations to `topic` (see `Engine.subscribe`).
        @discardableResult
        public mutating func subscribe(_ registrations: [RegistrationAddress], to topic: TopicName, in project: ProjectID = .default) throws(FanoutError) -> [BatchItemResult] {
            try EngineConfiguration.checkBatchSize(registrations.count, maximum: self.engine.configuration.maximumBatchSize)
            return try self.subscribe(RegistrationBatch(registrations), to: topic, in: project)
        }

        /// Subscribes up to 1000 installations, each named by a FID or a token, to `topic`; one
        /// result per registration, `INVALID_ARGUMENT` for one that is neither (see `Engine.subscribe`).
        @discardableResult
        public mutating func subscribe(_ registrations: RegistrationList, to topic: TopicName, in project: ProjectID = .default) throws(FanoutError) -> [BatchItemResult] {
            try self.subscribe(RegistrationBatch(parsing: registrations, maximum: self.engine.configuration.maximumBatchSize), to: topic, in: project)
        }

        private mutating func subscribe(_ batch: RegistrationBatch, to topic: TopicName, in project: ProjectID) throws(FanoutError) -> [BatchItemResult] {
            try self.mutate(project) { (state: inout ProjectState) in state.subscribe(batch, to: topic) }
        }

        /// Unsubscribes up to 1000 installations from `topic` (see `Engine.unsubscribe`).
        @discardableResult
        public mutating func unsubscribe(_ registrations: [RegistrationAddress], from topic: TopicName, in project: ProjectID = .default) throws(FanoutError) -> [BatchItemResult] {
            try EngineConfiguration.checkBatchSize(registrations.count, maximum: self.engine.configuration.maximumBatchSize)
            return try self.unsubscribe(RegistrationBatch(registrations), from: topic, in: project)
        }

        /// Unsubscribes up to 1000 installations, each named by a FID or a token, from `topic`;
        /// `INVALID_ARGUMENT` for a registration that is neither.
        @discardableResult
        public mutating func unsubscribe(_ registrations: RegistrationList, from topic: TopicName, in project: ProjectID = .default) throws(FanoutError) -> [BatchItemResult] {
            try self.unsubscribe(RegistrationBatch(parsing: registrations, maximum: self.engine.configuration.maximumBatchSize), from: topic, in: project)
        }

        private mutating func unsubscribe(_ batch: RegistrationBatch, from topic: TopicName, in project: ProjectID) throws(FanoutError) -> [BatchItemResult] {
            try self.mutate(project) { (state: inout ProjectState) in state.unsubscribe(batch, from: topic) }
        }

        // MARK: - Sends and deliveries

        /// Sends an FCM HTTP v1 body (see `Engine.send`).
        @discardableResult
        public mutating func send(_ body: [UInt8], in project: ProjectID = .default, options: SendOptions = SendOptions()) throws(FanoutError) -> SendResult {
            let now = self.engine.clock.now()
            let request: SendRequest
            do {
                request = try MessageParser.parseSendRequest(body)
            } catch {
                // A refused send counts against the project's quota, as FCM counts its 4xx answers.
                _ = try? self.engine.withProject(project) { (state: inout ProjectState) in state.sendLimiter.takeRefused(now: now) }
                throw FanoutError(error)
            }
            let target = request.message.target
            if request.validateOnly {
                try self.engine.withProject(project) { (state: inout ProjectState) throws(FanoutError) in
                    try state.sendLimiter.take(device: nil, field: "message", in: project, now: now)
                    try state.checkInstanceIDs(of: target)
                }
                return SendResult(
                    messageID: "projects/\(project)/messages/\(SendResult.validateOnlyMessageID)",
                    sequence: 0,
                    audience: 0,
                    enqueued: 0,
                    recipients: [],
                    platforms: RenderedMessage(request.message, acceptedAt: now).sizeReports
                )
            }
            let staleCutoff = options.skipStaleInstallations ? now.advanced(by: .zero - self.engine.configuration.staleAfter) : nil
            // Moved out of the request, not copied (a copy is a retain and release of each of its parts).
            let rendered = RenderedMessage((consume request).message, acceptedAt: now, skippingLastSeenBefore: staleCutoff)
            let result = try self.mutate(project) { (state: inout ProjectState) throws(FanoutError) in
                try state.takeSendQuota(for: target, now: now)
                try state.checkInstanceIDs(of: target)
                return state.send(rendered, now: now)
            }
            self.engine.metrics.recordSend(audience: result.audience)
            return result
        }

        /// Removes every delivery whose TTL has run out; returns how many.
        @discardableResult
        public mutating func expireDeliveries(in project: ProjectID = .default) throws(FanoutError) -> Int {
            let now = self.engine.clock.now()
            return try self.mutate(project) { (state: inout ProjectState) throws(FanoutError) in state.expireDeliveries(now: now) }
        }

        /// Acknowledges deliveries `consumer` holds (see `DeliveryConsumer.acknowledge`).
        @discardableResult
        public mutating func acknowledge(_ ids: [DeliveryID], by consumer: DeliveryConsumer) throws(FanoutError) -> Int {
            let now = self.engine.clock.now()
            let id = consumer.id
            return try self.mutate(consumer.project) { (state: inout ProjectState) throws(FanoutError) in
                try state.acknowledge(ids, consumer: id, now: now)
            }
        }
    }
}
