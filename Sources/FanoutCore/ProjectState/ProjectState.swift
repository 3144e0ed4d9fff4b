/// Everything one project owns: its installations, users, topics and mailboxes. A plain value with no locks;
/// `Engine` serialises access per project. Every mutation validates everything first and changes
/// state only when it will succeed, so nothing is ever half-applied.
///
/// Each logged operation returns its outcome with the log records that replay it (`Logged`), made
/// where the change is made; replay applies a record through the same function, with
/// `makesRecords` off. What an operation hands to consumers goes to `deliveries.handOuts`.
struct ProjectState {
    let id: ProjectID
    let configuration: EngineConfiguration
    var registry = InstallationRegistry()
    var topics: TopicIndex
    var users: [UserID: UserRecord] = [:]
    /// Since when the project's automatic anonymous clean-up is on (milliseconds), or `nil`: off.
    var anonymousCleanupEnabledAt: Int64?
    /// Whether legacy 11-character Instance IDs are accepted as FIDs (off by default).
    var acceptsLegacyInstanceIDs = false
    var deliveries = DeliveryState()
    /// The send quotas in use (in memory only).
    var sendLimiter: SendLimiter
    /// Whether transitions make their log records: not while replaying, where the records are
    /// already in the log (building a million of them took a sixth of a recovery).
    var makesRecords = true

    init(id: ProjectID, configuration: EngineConfiguration) {
        self.id = id
        self.configuration = configuration
        self.topics = TopicIndex(maximumTopicsPerInstallation: configuration.maximumTopicsPerInstallation)
        self.sendLimiter = SendLimiter(configuration.sendQuota)
    }

    // MARK: - Addressing

    /// The slot of a live installation.
    /// - Throws: `UNREGISTERED` for the FID of a deleted installation or a retired token, `NOT_FOUND` otherwise.
    func slot(for address: RegistrationAddress, field: String = "registration") throws(FanoutError) -> UInt32 {
        if let slot = self.registry.slot(for: address) { return slot }
        if self.isRetired(address) {
            switch address {
            case .token: throw FanoutError(.unregistered, "the token is no longer registered", field: field)
            case .fid: throw FanoutError(.unregistered, "the installation was deleted", field: field)
            }
        }
        throw .notFound("no installation with this \(address.kindName) in project \(self.id)", field: field)
    }

    /// Whether an address named an installation once (a deleted FID, a rotated or deleted token).
    func isRetired(_ address: RegistrationAddress) -> Bool {
        switch address {
        case .token(let token):
            return self.registry.isRetired(token) || InstallationRegistry.legacyInstanceID(token).map(self.registry.isRetired) == true
        case .fid(let fid): return self.registry.isRetired(fid) || RegistrationToken(fid.description).map(self.registry.isRetired) == true
        }
    }

    // MARK: - Installations

    /// Registers an installation, or finds the same registration already there (logged only when new).
    mutating func register(_ request: RegistrationRequest, now: Timestamp) throws(FanoutError) -> Logged<RegistrationResult> {
        let keys = RegistrationKeys(request, allowingLegacy: self.acceptsLegacyInstanceIDs)
        let result = try self.registry.register(request, keys: keys, accepting: self.configuration.acceptsFID, now: now)
        guard !result.isExisting, self.makesRecords else { return (result, []) }
        return (result, [.register(self.id, .init(request, fid: result.installation.fid, at: now))])
    }

    /// Registers an installation and sets its credential digest, logged together. Everything that
    /// can refuse it runs before anything changes.
    mutating func register(
        _ request: RegistrationRequest,
        now: Timestamp,
        creatingOnly: Bool,
        credential: (FID) -> [UInt8]
    ) throws(FanoutError) -> Logged<RegistrationResult> {
        var (result, records) = try self.register(request, now: now)
        if creatingOnly, result.isExisting {
            // A repeat changed nothing.
            throw FanoutError(.alreadyExists, "the installation exists: its device gets new auth tokens with its refresh token", field: request.token == nil ? "fid" : "token")
        }
        let installation = result.installation
        let digest = credential(installation.fid)
        self.registry.setCredentialDigest(digest, atSlot: installation.slot)
        records.append(.setCredential(self.id, fid: installation.fid, digest: digest))
        return (result, records)
    }

    /// How many items ahead of the one it registers a batch asks for index buckets. Asked for
    /// all at once before the first, the buckets of a batch's later items were out of the cache
    /// again by their turn (each item writes its token, record and index entries in between): the
    /// two lookups of a new item's FID and token were 8% of fanoutd's CPU in a register batch,
    /// nearly all of it waiting for the bucket.
    static let registrationPrefetchDistance = 8

    /// Registers each item on its own (a refused one changes nothing): what each did, in order,
    /// and the records of those that registered.
    mutating func register(
        _ items: inout RegistrationItems,
        now: Timestamp
    ) -> Logged<[Swift.Result<InstallationRegistry.Addition, FanoutError>]> {
        // Each item's index buckets are asked for `registrationPrefetchDistance` items before it
        // is registered, so that their cache misses overlap with the registrations before it
        // (`InstallationRegistry.prefetch(_:)`; a refused item's keys have no hashes).
        let keys = items.keys(allowingLegacy: self.acceptsLegacyInstanceIDs)
        for index in 0..<min(Self.registrationPrefetchDistance, keys.count) {
            self.registry.prefetch(keys[index])
        }
        let accepts = self.configuration.acceptsFID
        var results: [Swift.Result<InstallationRegistry.Addition, FanoutError>] = []
        results.reserveCapacity(items.count)
        var records: [WALRecord] = []
        records.reserveCapacity(self.makesRecords ? items.count : 0)
        let refusals = items.refusals
        let encodedFields = items.encodedFields.bytes
        items.forEachRequest { index, request, encodedRange in
            if index + Self.registrationPrefetchDistance < keys.count {
                self.registry.prefetch(keys[index + Self.registrationPrefetchDistance])
            }
            if let refusal = refusals[index] {
                results.append(.failure(refusal))
                return
            }
            do throws(FanoutError) {
                let addition = try self.registry.add(request, keys: keys[index], accepting: accepts, now: now)
                if case .new(_, _, let fid, _) = addition, self.makesRecords {
                    let encoded = WALRecord.EncodedRegistration(fid: fid, batchFields: encodedFields, range: encodedRange, at: now)
                    records.append(.registerEncoded(self.id, encoded))
                }
                results.append(.success(addition))
            } catch {
                results.append(.failure(error))
            }
        }
        return (results, records)
    }

    mutating func refreshToken(
        _ address: RegistrationAddress,
        to token: RegistrationToken,
        now: Timestamp
    ) throws(FanoutError) -> Logged<Installation> {
        let slot = try self.slot(for: address)
        try self.registry.replaceToken(atSlot: slot, with: token, now: now)
        self.touchUser(of: slot, now: now)
        let installation = self.registry.installation(atSlot: slot)!
        return self.logged(installation, .refreshToken(self.id, fid: installation.fid, token: token, at: now))
    }

    mutating func touch(_ address: RegistrationAddress, now: Timestamp) throws(FanoutError) -> Logged<Installation> {
        let slot = try self.slot(for: address)
        self.registry.touch(slot: slot, now: now)
        self.touchUser(of: slot, now: now)
        let installation = self.registry.installation(atSlot: slot)!
        return self.logged(installation, .touch(self.id, fid: installation.fid, at: now))
    }

    /// Sets (or with `nil` clears) an iOS installation's APNs device token; an installation that
    /// had the token loses it.
    mutating func setAPNsToken(_ token: APNsDeviceToken?, of address: RegistrationAddress) throws(FanoutError) -> Logged<Installation> {
        let slot = try self.slot(for: address)
        try self.registry.setAPNsToken(token, atSlot: slot)
        let installation = self.registry.installation(atSlot: slot)!
        return self.logged(installation, .setAPNsToken(self.id, fid: installation.fid, token: token))
    }

    /// Turns the acceptance of legacy Instance IDs on or off.
    mutating func setLegacyInstanceIDs(_ accepted: Bool) -> Logged<Bool> {
        self.acceptsLegacyInstanceIDs = accepted
        return self.logged(accepted, .setLegacyInstanceIDs(self.id, accepted: accepted))
    }

    /// Refuses a send target naming a legacy Instance ID in a project that does not accept them.
    func checkInstanceIDs(of target: Message.Target) throws(FanoutError) {
        guard !self.acceptsLegacyInstanceIDs, let field = target.legacyInstanceIDField else { return }
        throw .invalidArgument("not a valid Firebase Installation ID (project \(self.id) does not accept legacy 11-character Instance IDs)", field: field)
    }

    /// Gives an installation credentials: the SHA-256 of its new refresh token (the one before,
    /// and every auth token issued with it, stop working).
    mutating func setCredential(_ digest: [UInt8], of address: RegistrationAddress) throws(FanoutError) -> Logged<Installation> {
        guard digest.count == 32 else { throw .invalidArgument("a credential digest is 32 bytes", field: "credential") }
        let slot = try self.slot(for: address)
        self.registry.setCredentialDigest(digest, atSlot: slot)
        let installation = self.registry.installation(atSlot: slot)!
        return self.logged(installation, .setCredential(self.id, fid: installation.fid, digest: digest))
    }

    /// The installation with this FID and the SHA-256 of its refresh token, if it is live and has credentials.
    func credential(of fid: FID) -> (installation: Installation, digest: [UInt8])? {
        guard let slot = self.registry.slot(forFID: fid), let digest = self.registry.credentialDigest(ofSlot: slot),
            let installation = self.registry.installation(atSlot: slot)
        else { return nil }
        return (installation, digest)
    }

    /// The installation an APNs device token belongs to.
    /// - Throws: `NOT_FOUND` (field `apnsToken`) when none has it.
    func installation(forAPNsToken token: APNsDeviceToken) throws(FanoutError) -> Installation {
        guard let slot = self.registry.slot(forAPNsToken: token) else {
            throw .notFound("no installation has this APNs device token", field: "apnsToken")
        }
        return self.registry.installation(atSlot: slot)!
    }

    func installation(_ address: RegistrationAddress) throws(FanoutError) -> Installation {
        let slot = try self.slot(for: address)
        // Found by its token (not as a legacy Instance ID): the installation has that token, so
        // it is not copied out of the arena.
        if case .token(let token) = address, InstallationRegistry.legacyInstanceID(token) == nil {
            return self.registry.installation(atSlot: slot, token: token)!
        }
        return self.registry.installation(atSlot: slot)!
    }

    /// Deletes an installation and everything it owns: token, subscriptions, user binding.
    mutating func delete(_ fid: FID) throws(FanoutError) -> Logged<Installation> {
        let slot = try self.slot(for: .fid(fid), field: "fid")
        let installation = self.registry.installation(atSlot: slot)!
        self.deleteSlot(slot)
        return self.logged(installation, .deleteInstallation(self.id, fid: fid))
    }

    private mutating func deleteSlot(_ slot: UInt32) {
        self.dropMailbox(slot)
        self.sendLimiter.forget(slot)
        self.topics.removeAll(of: slot)
        self.unbind(slot)
        self.registry.delete(slot: slot)
    }

    /// Installations not seen since `now - staleAfter`, oldest first.
    func staleInstallations(now: Timestamp) -> [Installation] {
        let cutoff = now.advanced(by: .zero - self.configuration.staleAfter)
        return self.registry.slots(lastSeenBefore: cutoff)
            .compactMap { self.registry.installation(atSlot: $0) }
            .sorted { ($0.lastSeen, $0.slot) < ($1.lastSeen, $1.slot) }
    }

    /// Deletes installations not seen since `now - expireAfter`; returns them.
    mutating func pruneExpired(now: Timestamp) -> Logged<[Installation]> {
        let cutoff = now.advanced(by: .zero - self.configuration.expireAfter)
        let expired = self.prune(lastSeenBefore: cutoff)
        return self.logged(expired, when: !expired.isEmpty, .pruneLastSeenBefore(self.id, cutoff: cutoff))
    }

    /// Deletes every installation last seen before `cutoff`; returns what they were.
    mutating func prune(lastSeenBefore cutoff: Timestamp) -> [Installation] {
        var expired: [Installation] = []
        for slot in self.registry.slots(lastSeenBefore: cutoff) {
            expired.append(self.registry.installation(atSlot: slot)!)
            self.deleteSlot(slot)
        }
        return expired
    }

    // MARK: - Topics

    /// Subscribes a batch's installations to `topic`; the log records the slots that are
    /// subscribed now.
    mutating func subscribe(_ batch: RegistrationBatch, to topic: TopicName) -> Logged<[BatchItemResult]> {
        var (results, slots, positions) = self.resolve(batch)
        var subscribed: [SlotReference] = []
        subscribed.reserveCapacity(slots.count)
        for (index, code) in self.topics.subscribe(slots, to: topic).enumerated() {
            if let code {
                results[positions[index]] = .failed(code)
            } else if self.makesRecords {
                subscribed.append(self.reference(to: slots[index]))
            }
        }
        return self.logged(results, when: !subscribed.isEmpty, .subscribe(self.id, topic: topic, installations: subscribed))
    }

    /// Unsubscribes a batch's installations from `topic`; not being subscribed is fine.
    mutating func unsubscribe(_ batch: RegistrationBatch, from topic: TopicName) -> Logged<[BatchItemResult]> {
        let (results, slots, _) = self.resolve(batch)
        self.topics.unsubscribe(slots, from: topic)
        return self.logged(results, when: !slots.isEmpty, .unsubscribe(self.id, topic: topic, installations: slots.map(self.reference(to:))))
    }

    /// How a subscription record names a live installation (one a lookup found under this lock).
    private func reference(to slot: UInt32) -> SlotReference {
        SlotReference(slot: slot, check: SlotReference.check(of: self.registry.fid(ofLiveSlot: slot)))
    }

    func topics(of address: RegistrationAddress) throws(FanoutError) -> [TopicName] {
        self.topics.topics(of: try self.slot(for: address))
    }

    /// Resolves a batch: a result per item (`INVALID_ARGUMENT` when it is neither a FID nor a
    /// token, `UNREGISTERED` when it named an installation once (a rotated or deleted token, a
    /// deleted FID), `NOT_FOUND` when unknown, `ok` otherwise), and the slots found with their
    /// positions in the input.
    private func resolve(_ batch: RegistrationBatch) -> (results: [BatchItemResult], slots: [UInt32], positions: [Int]) {
        var results = [BatchItemResult](repeating: .ok, count: batch.count)
        var slots: [UInt32] = []
        var positions: [Int] = []
        slots.reserveCapacity(batch.count)
        positions.reserveCapacity(batch.count)
        for (index, slot) in self.registry.slots(for: batch).enumerated() {
            if let slot {
                slots.append(slot)
                positions.append(index)
            } else if let address = batch.address(at: index) {
                results[index] = .failed(self.isRetired(address) ? .unregistered : .notFound)
            } else {
                results[index] = .failed(.invalidArgument)
            }
        }
        return (results, slots, positions)
    }
}

extension RegistrationAddress {
    var kindName: String {
        switch self {
        case .fid: return "FID"
        case .token: return "token"
        }
    }
}

/// A logged operation's outcome and the log records that replay it (none when nothing changed).
typealias Logged<Result> = (result: Result, records: [WALRecord])

extension ProjectState {
    /// `result` with `record` (made only when records are made, and `when` holds).
    @inline(__always)
    func logged<Result>(_ result: Result, when condition: Bool = true, _ record: @autoclosure () -> WALRecord) -> Logged<Result> {
        (result, self.makesRecords && condition ? [record()] : [])
    }
}
