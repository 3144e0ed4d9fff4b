internal import CFanoutIntrinsics
import Glibc

/// The installations of one project, in dense `UInt32` slots.
///
/// Slots index plain arrays (struct of records), and two `SlotHashIndex` tables map FIDs and
/// tokens to slots. A deleted installation's slot goes on a free list and is reused with its generation
/// incremented; its FID and token are retired (tombstoned), so neither can ever address the next
/// holder of the slot, nor be registered again. Not thread-safe: the engine serialises access.
struct InstallationRegistry {
    /// One slot's state (56 bytes). A free slot has platform code 0 in `platformCodes`; its record
    /// keeps its last FID and generation.
    private struct Record {
        var token: TokenReference
        /// The bound user's number in `users` (0: none).
        var user: UInt32
        var fid: FID
        var appIndex: UInt16
        var generation: UInt32
        var createdAt: Int64
        var lastSeen: Int64
        /// Device details and the APNs token: rarely read, so kept out of line.
        var extras: Extras?

        /// A slot never used: its FID is a placeholder no lookup reaches (it is in no index).
        static let unused = Record(
            token: .none, user: 0, fid: FID.placeholder, appIndex: 0, generation: 0, createdAt: 0, lastSeen: 0, extras: nil
        )
    }

    private final class Extras: Sendable {
        let device: DeviceDetails
        let apnsToken: APNsDeviceToken?

        init(device: DeviceDetails, apnsToken: APNsDeviceToken?) {
            self.device = device
            self.apnsToken = apnsToken
        }
    }

    /// Grown by `realloc`: past 524,288 installations, an `Array`'s doubling copied 28 MB of
    /// records into a fresh 56 MB block, with the project's lock held.
    private var records = ReallocatedArray<Record>()
    /// The records' registration tokens, packed.
    private var tokens = TokenArena()
    /// The users the records are bound to.
    private var users = InternedUsers()
    /// Each slot's `Platform.code` (0 when free), with `tokenlessBit` set while the installation
    /// has no registration token, apart from the records: a fan-out reads it for every recipient,
    /// and one byte per slot stays in cache where a ~90-byte record would miss.
    private var platformCodes: [UInt8] = []
    private static let tokenlessBit: UInt8 = 0x80
    private var freeSlots: [UInt32] = []
    private var slotByFID = SlotHashIndex()
    private var slotByToken = SlotHashIndex()
    /// The installation each APNs device token belongs to: at most one per project (FCM's APNs
    /// token mapping). Only iOS installations that gave one are here.
    private var slotByAPNsToken: [APNsDeviceToken: UInt32] = [:]
    /// SHA-256 of each installation's refresh token, for the installations that have credentials.
    private var credentialDigests: [UInt32: [UInt8]] = [:]
    /// FIDs of deleted installations: never reassigned.
    private var retiredFIDs: Set<FID> = []
    /// Stable 64-bit hashes of tokens that were rotated away, signed out or deleted.
    private var retiredTokens: Set<UInt64> = []
    /// The records' app ids.
    private var appIDs = InternedAppIDs()
    static let maximumAppCount = InternedAppIDs.maximumCount
    /// Every live slot: the universe of `!` in conditions.
    private(set) var liveSlots = SlotSet()

    /// The number of live installations.
    var count: Int { self.liveSlots.count }

    /// One past the highest slot ever used.
    var slotCapacity: Int { self.records.count }

    /// The bytes of the chunks holding the registration tokens.
    var tokenArenaBytes: Int { self.tokens.allocatedBytes }

    /// How many users installations are bound to.
    var boundUserCount: Int { self.users.count }

    // MARK: - Lookups

    /// The slot an address names. A string shaped like a FID names the installation with that FID,
    /// or, when there is none, the one whose token it is (a token may look like a FID); the same
    /// for an 11-character string shaped like a legacy Instance ID.
    func slot(for address: RegistrationAddress) -> UInt32? {
        switch address {
        case .fid(let fid): return self.slot(forFID: fid) ?? self.slot(forFIDShapedToken: fid)
        case .token(let token):
            if let legacy = Self.legacyInstanceID(token), let slot = self.slot(forFID: legacy) { return slot }
            return self.slot(forToken: token)
        }
    }

    /// The legacy Instance ID a token-shaped string also is, if it is one (11 characters, c-f first).
    static func legacyInstanceID(_ token: RegistrationToken) -> FID? {
        token.withUTF8(Self.legacyInstanceID(bytes:))
    }

    /// The legacy Instance ID a token's bytes also are, if they are one.
    static func legacyInstanceID(bytes: UnsafeRawBufferPointer) -> FID? {
        bytes.count == 11 ? FID(legacyInstanceID: String(decoding: bytes, as: UTF8.self)) : nil
    }

    private func slot(forFIDShapedToken fid: FID) -> UInt32? {
        RegistrationToken(fid.description).flatMap { self.slot(forToken: $0) }
    }

    /// The slots of many addresses (nil where unknown), in order.
    func slots(for addresses: [RegistrationAddress]) -> [UInt32?] {
        self.slots(for: RegistrationBatch(addresses))
    }

    /// The slots of a batch's items (nil where unknown or invalid), in order. A lookup is three
    /// dependent cache misses (the bucket, the slot's record, the stored token's bytes); one key
    /// at a time, each key's misses queue behind the previous key's. So the batch goes in passes,
    /// each asking for what the next reads: prefetch every key's bucket, find every key's
    /// candidate slot (prefetching its record), prefetch every candidate token's bytes, and only
    /// then compare the keys, so that each pass's misses overlap. (The batch hashed the keys
    /// before the project's lock was taken.)
    func slots(for batch: RegistrationBatch) -> [UInt32?] {
        for (item, hash) in zip(batch.items, batch.hashes) {
            switch item {
            case .fid: self.slotByFID.prefetch(hash: hash)
            case .token: self.slotByToken.prefetch(hash: hash)
            case .invalid: break
            }
        }
        let candidates = self.records.withUnsafeBufferPointer { records in
            zip(batch.items, batch.hashes).map { item, hash -> UInt32? in
                let candidate: UInt32?
                switch item {
                case .fid: candidate = self.slotByFID.candidate(hash: hash)
                case .token: candidate = self.slotByToken.candidate(hash: hash)
                case .invalid: candidate = nil
                }
                if let candidate, Int(candidate) < records.count { fanout_prefetch(records.baseAddress! + Int(candidate)) }
                return candidate
            }
        }
        self.prefetchTokens(of: zip(batch.items, candidates).lazy.compactMap { item, candidate in
            if case .token = item { return candidate }
            return nil
        })
        return batch.items.indices.map { index in
            let candidate = candidates[index]
            switch batch.items[index] {
            case .fid(let fid):
                if let candidate, self.records[Int(candidate)].fid == fid { return candidate }
                return self.slotByFID.find(hash: batch.hashes[index]) { self.records[Int($0)].fid == fid } ?? self.slot(forFIDShapedToken: fid)
            case .token:
                return batch.withBytes(at: index) { token in
                    if let legacy = Self.legacyInstanceID(bytes: token), let slot = self.slot(forFID: legacy) { return slot }
                    guard let candidate else { return nil }
                    if self.holds(token, atSlot: candidate) { return candidate }
                    return self.slotByToken.find(hash: batch.hashes[index]) { self.holds(token, atSlot: $0) }
                }
            case .invalid:
                return nil
            }
        }
    }

    /// Prefetches the first 192 bytes of the token entries of the installations in `slots`
    /// (whose records the caller prefetched).
    private func prefetchTokens(of slots: some Sequence<UInt32>) {
        self.records.withUnsafeBufferPointer { records in
            for slot in slots where records[Int(slot)].token != .none {
                TokenArena.prefetch(entry: self.tokens.address(of: records[Int(slot)].token))
            }
        }
    }

    /// Prefetches the records of `slots` (each up to `slotCapacity`): a batch about to read many
    /// records waits for their cache misses side by side instead of one after another.
    func prefetchRecords(of slots: some Sequence<UInt32>) {
        self.records.withUnsafeBufferPointer { records in
            guard let first = records.baseAddress else { return }
            for slot in slots where Int(slot) < records.count { fanout_prefetch(first + Int(slot)) }
        }
    }

    /// The registration a request repeats (see `RegistrationResult.isExisting`), if the
    /// installation in `slot` (the holder of the request's token, or, without a token, of the
    /// offered FID) has no other token and the request's platform, app, device details and APNs
    /// token, and the offered FID is absent or its own.
    private func repeatedRegistration(_ request: RegistrationRequest, offered: FID?, at slot: UInt32) -> RegistrationResult? {
        guard let installation = self.installation(atSlot: slot),
            offered == nil || offered == installation.fid,
            installation.token == request.token,
            installation.platform == request.platform,
            installation.appID == request.appID,
            installation.device == request.device,
            installation.apnsToken == request.apnsToken
        else { return nil }
        return RegistrationResult(installation: installation, fidWasAssigned: offered == nil, isExisting: true)
    }

    func slot(forFID fid: FID, hash: Int? = nil) -> UInt32? {
        self.slotByFID.find(hash: hash ?? fid.hashValue) { self.records[Int($0)].fid == fid }
    }

    func slot(forToken token: RegistrationToken, hash: Int? = nil) -> UInt32? {
        // The closures take the three parts of the registry they read, not `self`: capturing the
        // registry copied it (a retain and a release of each of its 28 references) on every lookup.
        let (index, records, tokens) = (self.slotByToken, self.records, self.tokens)
        return token.withUTF8 { key in
            index.find(hash: hash ?? Self.tokenHash(key)) { Self.holds(key, atSlot: $0, records: records, tokens: tokens) }
        }
    }

    /// Whether the installation at `slot` has the token `key` (the bytes compared in place).
    private func holds(_ key: UnsafeRawBufferPointer, atSlot slot: UInt32) -> Bool {
        Self.holds(key, atSlot: slot, records: self.records, tokens: self.tokens)
    }

    private static func holds(_ key: UnsafeRawBufferPointer, atSlot slot: UInt32, records: ReallocatedArray<Record>, tokens: TokenArena) -> Bool {
        let reference = records[Int(slot)].token
        guard reference != .none else { return false }
        return tokens.withBytes(reference) { stored in
            key.count == stored.count && memcmp(key.baseAddress!, stored.baseAddress!, key.count) == 0
        }
    }

    func isLive(_ slot: UInt32) -> Bool {
        Int(slot) < self.platformCodes.count && self.platformCodes[Int(slot)] != 0
    }

    func fid(ofSlot slot: UInt32) -> FID? {
        guard self.isLive(slot) else { return nil }
        return self.records[Int(slot)].fid
    }

    /// The FID of the installation in `slot`, which the caller knows is live (a lookup found it
    /// under the same lock): no liveness check, whose read of `platformCodes` was a cache miss
    /// of its own for each slot of a batch.
    func fid(ofLiveSlot slot: UInt32) -> FID {
        self.records[Int(slot)].fid
    }

    /// Where the registration token of the installation in `slot` is, if it has one; valid while
    /// its chunk (`tokenChunk`) lives.
    func tokenLocation(ofSlot slot: UInt32) -> TokenLocation? {
        guard Int(slot) < self.records.count, self.records[Int(slot)].token != .none else { return nil }
        return self.tokens.location(self.records[Int(slot)].token)
    }

    /// Token chunk `index` of a `TokenLocation`.
    func tokenChunk(_ index: Int) -> TokenChunk {
        self.tokens.chunk(index)
    }

    /// The installation's token, copied out of the arena (no `StoredToken`: its chunk need not be
    /// retained for the copy).
    func token(ofSlot slot: UInt32) -> RegistrationToken? {
        guard Int(slot) < self.records.count, self.records[Int(slot)].token != .none else { return nil }
        return self.tokens.withBytes(self.records[Int(slot)].token) { RegistrationToken(validatedBytes: $0) }
    }

    func slot(forAPNsToken token: APNsDeviceToken) -> UInt32? {
        self.slotByAPNsToken[token]
    }

    func apnsToken(ofSlot slot: UInt32) -> APNsDeviceToken? {
        guard Int(slot) < self.records.count else { return nil }
        return self.records[Int(slot)].extras?.apnsToken
    }

    /// The SHA-256 of the installation's refresh token, when it has credentials.
    func credentialDigest(ofSlot slot: UInt32) -> [UInt8]? {
        self.credentialDigests[slot]
    }

    /// Gives the installation credentials (replacing any it had) or, with nil, removes them.
    mutating func setCredentialDigest(_ digest: [UInt8]?, atSlot slot: UInt32) {
        self.credentialDigests[slot] = digest
    }

    func user(ofSlot slot: UInt32) -> UserID? {
        guard Int(slot) < self.records.count else { return nil }
        return self.users.user(self.records[Int(slot)].user)
    }

    func platform(ofSlot slot: UInt32) -> Platform? {
        guard Int(slot) < self.platformCodes.count else { return nil }
        return Platform(code: self.platformCodes[Int(slot)] & ~Self.tokenlessBit)
    }

    /// The platform of a live slot and whether it has a registration token to deliver to, from
    /// the one byte a fan-out reads per recipient.
    func deliveryTarget(ofSlot slot: UInt32) -> (platform: Platform, hasToken: Bool)? {
        guard Int(slot) < self.platformCodes.count else { return nil }
        let byte = self.platformCodes[Int(slot)]
        return Platform(code: byte & ~Self.tokenlessBit).map { ($0, byte & Self.tokenlessBit == 0) }
    }

    func lastSeen(ofSlot slot: UInt32) -> Timestamp? {
        guard self.isLive(slot) else { return nil }
        return Timestamp(millisecondsSinceEpoch: self.records[Int(slot)].lastSeen)
    }

    func isRetired(_ token: RegistrationToken) -> Bool {
        !self.retiredTokens.isEmpty && self.retiredTokens.contains(Self.stableHash(token))
    }

    func isRetired(_ fid: FID) -> Bool {
        self.retiredFIDs.contains(fid)
    }

    func installation(atSlot slot: UInt32) -> Installation? {
        self.installation(atSlot: slot, token: self.token(ofSlot: slot))
    }

    /// The installation at `slot`, whose token is known to be `token` (no copy out of the arena).
    func installation(atSlot slot: UInt32, token: RegistrationToken?) -> Installation? {
        guard self.isLive(slot) else { return nil }
        let record = self.records[Int(slot)]
        return Installation(
            slot: slot,
            generation: record.generation,
            fid: record.fid,
            token: token,
            platform: self.platform(ofSlot: slot)!,
            appID: self.appIDs[record.appIndex],
            device: record.extras?.device ?? DeviceDetails(),
            apnsToken: record.extras?.apnsToken,
            user: self.users.user(record.user),
            createdAt: Timestamp(millisecondsSinceEpoch: record.createdAt),
            lastSeen: Timestamp(millisecondsSinceEpoch: record.lastSeen)
        )
    }

    // MARK: - Mutations

    /// Registers `request` as `register(_:keys:accepting:now:)` does, its keys made here (no
    /// legacy Instance IDs, any FID).
    mutating func register(_ request: RegistrationRequest, now: Timestamp) throws(FanoutError) -> RegistrationResult {
        try self.register(request, keys: RegistrationKeys(request, allowingLegacy: false), now: now)
    }

    /// Asks for the index buckets registering `keys` reads first (its offered FID's and its
    /// token's), without waiting for them: a batch prefetches each item's a few items before
    /// registering it, so that their cache misses overlap instead of queueing one after another.
    /// (Mutating though it changes nothing: called from the batch's loop, a closure that holds the
    /// project's state inout, a non-mutating call copied the whole registry first.)
    mutating func prefetch(_ keys: RegistrationKeys) {
        if let hash = keys.offeredHash { self.slotByFID.prefetch(hash: hash) }
        if let hash = keys.tokenHash { self.slotByToken.prefetch(hash: hash) }
    }

    /// Registers a new installation. Checks everything before changing anything.
    /// - Throws: `ALREADY_EXISTS` when the token belongs to another installation; `INVALID_ARGUMENT`
    ///   when the token was retired or an APNs token is given for a platform other than iOS.
    /// `keys` are the request's, parsed and hashed (`RegistrationKeys`: replay's offered FID, and
    /// whether the project keeps an offered legacy Instance ID, are settled there).
    /// `accepting`: the FIDs this registry may give (a cluster shard's); nil: any.
    mutating func register(
        _ request: RegistrationRequest,
        keys: RegistrationKeys,
        accepting accepts: ((FID) -> Bool)? = nil,
        now: Timestamp
    ) throws(FanoutError) -> RegistrationResult {
        try self.add(request, keys: keys, accepting: accepts, now: now).result(of: request, at: now)
    }

    /// What a registration changed: nothing, when the request repeats an existing registration
    /// (`existing`, as `register` returns it), or a new installation.
    enum Addition {
        case existing(RegistrationResult)
        case new(slot: UInt32, generation: UInt32, fid: FID, fidWasAssigned: Bool)

        /// What `register` answers for `request`, registered at `now` with this outcome.
        func result(of request: RegistrationRequest, at now: Timestamp) -> RegistrationResult {
            switch self {
            case .existing(let result):
                return result
            case .new(let slot, let generation, let fid, let fidWasAssigned):
                // Made of the request's own values, not the registry's: its app id is the one string
                // every installation of the app shares, and retaining it from each event loop and the
                // log's writer made its reference count bounce between the cores.
                let installation = Installation(
                    slot: slot,
                    generation: generation,
                    fid: fid,
                    token: request.token,
                    platform: request.platform,
                    appID: request.appID,
                    device: request.device,
                    apnsToken: request.apnsToken,
                    user: nil,
                    createdAt: now,
                    lastSeen: now
                )
                return RegistrationResult(installation: installation, fidWasAssigned: fidWasAssigned)
            }
        }

        /// What REGISTER_BATCH_FIDS answers: the FID and the flags, no installation made.
        var receipt: RegistrationReceipt {
            switch self {
            case .existing(let result): RegistrationReceipt(result)
            case .new(_, _, let fid, let fidWasAssigned): .registered(fid: fid, fidWasAssigned: fidWasAssigned, isExisting: false)
            }
        }
    }

    /// Registers as `register(_:keys:accepting:now:)` does, without making the new installation's
    /// description: replay needs only to know whether the FID was the offered one, and building an
    /// `Installation` (its strings retained, then released) was about 3% of replay.
    mutating func add(
        _ request: RegistrationRequest,
        keys: RegistrationKeys,
        accepting accepts: ((FID) -> Bool)?,
        now: Timestamp
    ) throws(FanoutError) -> Addition {
        let offered = keys.offered
        let tokenHash = keys.tokenHash
        let offeredHash = keys.offeredHash
        if let token = request.token {
            if let holder = self.slot(forToken: token, hash: tokenHash) {
                if let repeated = self.repeatedRegistration(request, offered: offered, at: holder) { return .existing(repeated) }
                throw FanoutError(.alreadyExists, "the token is registered to another installation", field: "token")
            }
            guard !self.isRetired(token) else {
                throw .invalidArgument("the token was retired (rotated away or deleted) and cannot be registered again", field: "token")
            }
        } else if let offered, let holder = self.slot(forFID: offered, hash: offeredHash),
            let repeated = self.repeatedRegistration(request, offered: offered, at: holder)
        {
            return .existing(repeated)
        }
        if request.apnsToken != nil && request.platform != .ios {
            throw .invalidArgument("an APNs device token is only accepted for iOS installations", field: "apnsToken")
        }
        if request.token != nil { try self.checkTokenRoom() }
        let appIndex = try self.appIDs.intern(request.appID)
        var fid: FID
        var assigned = true
        var fidHash: Int
        if let offered, let offeredHash, self.slot(forFID: offered, hash: offeredHash) == nil, !self.retiredFIDs.contains(offered), accepts?(offered) ?? true {
            fid = offered
            fidHash = offeredHash
            assigned = false
        } else {
            fid = try FID.generate()
            // 132 random bits: a collision is astronomically unlikely, but never hand out a used FID.
            while self.slot(forFID: fid) != nil || self.retiredFIDs.contains(fid) || !(accepts?(fid) ?? true) {
                fid = try FID.generate()
            }
            fidHash = fid.hashValue
        }

        let slot = self.allocateSlot()
        let extras = (request.device == DeviceDetails() && request.apnsToken == nil)
            ? nil : Extras(device: request.device, apnsToken: request.apnsToken)
        let generation = self.records[Int(slot)].generation &+ 1
        self.records[Int(slot)] = Record(
            token: request.token.map { self.storeToken($0, atSlot: slot) } ?? .none,
            user: 0,
            fid: fid,
            appIndex: appIndex,
            generation: generation,
            createdAt: now.millisecondsSinceEpoch,
            lastSeen: now.millisecondsSinceEpoch,
            extras: extras
        )
        self.slotByFID.insert(hash: fidHash, slot: slot)
        if let tokenHash {
            self.slotByToken.insert(hash: tokenHash, slot: slot)
            self.evacuateTokenChunks()
        }
        self.platformCodes[Int(slot)] = request.platform.code | (request.token == nil ? Self.tokenlessBit : 0)
        self.liveSlots.insert(slot)
        if let apnsToken = request.apnsToken { self.indexAPNsToken(apnsToken, at: slot) }
        return .new(slot: slot, generation: generation, fid: fid, fidWasAssigned: assigned)
    }

    /// Gives the installation at `slot` a new token; the old one is retired (`UNREGISTERED` from now on).
    /// Setting the current token again changes nothing.
    mutating func replaceToken(atSlot slot: UInt32, with token: RegistrationToken, now: Timestamp) throws(FanoutError) {
        if token.withUTF8({ self.holds($0, atSlot: slot) }) {
            self.records[Int(slot)].lastSeen = now.millisecondsSinceEpoch
            return
        }
        guard self.slot(forToken: token) == nil else {
            throw FanoutError(.alreadyExists, "the token is registered to another installation", field: "token")
        }
        guard !self.isRetired(token) else {
            throw .invalidArgument("the token was retired (rotated away or deleted) and cannot be registered again", field: "token")
        }
        try self.checkTokenRoom()
        self.dropToken(atSlot: slot)
        self.records[Int(slot)].token = self.storeToken(token, atSlot: slot)
        self.records[Int(slot)].lastSeen = now.millisecondsSinceEpoch
        self.slotByToken.insert(hash: Self.tokenHash(token), slot: slot)
        self.platformCodes[Int(slot)] &= ~Self.tokenlessBit
        self.evacuateTokenChunks()
    }

    /// Sets or clears the APNs device token of the (iOS) installation at `slot`. A token another
    /// installation holds moves here: it belongs to at most one installation.
    /// - Throws: `INVALID_ARGUMENT` for an installation that is not iOS.
    mutating func setAPNsToken(_ token: APNsDeviceToken?, atSlot slot: UInt32) throws(FanoutError) {
        guard token == nil || self.platform(ofSlot: slot) == .ios else {
            throw .invalidArgument("an APNs device token is only accepted for iOS installations", field: "apnsToken")
        }
        if let current = self.apnsToken(ofSlot: slot) { self.slotByAPNsToken[current] = nil }
        self.setAPNsTokenOfRecord(token, atSlot: slot)
        if let token { self.indexAPNsToken(token, at: slot) }
    }

    /// Records in the index that `slot`, whose record has the token, holds it; the installation
    /// that held it before loses it from its record.
    private mutating func indexAPNsToken(_ token: APNsDeviceToken, at slot: UInt32) {
        if let holder = self.slotByAPNsToken.updateValue(slot, forKey: token), holder != slot {
            self.setAPNsTokenOfRecord(nil, atSlot: holder)
        }
    }

    /// The record's APNs token, its device details kept (no extras when both are empty).
    private mutating func setAPNsTokenOfRecord(_ token: APNsDeviceToken?, atSlot slot: UInt32) {
        let device = self.records[Int(slot)].extras?.device ?? DeviceDetails()
        self.records[Int(slot)].extras = (device == DeviceDetails() && token == nil) ? nil : Extras(device: device, apnsToken: token)
    }

    /// Retires the token of `slot`, if it has one (sign-out and rotation).
    mutating func dropToken(atSlot slot: UInt32) {
        let reference = self.records[Int(slot)].token
        guard reference != .none else { return }
        let (hash, stableHash) = self.tokens.withBytes(reference) { (Self.tokenHash($0), FNV1a.hash64($0)) }
        self.slotByToken.remove(hash: hash, slot: slot)
        self.retiredTokens.insert(stableHash)
        self.tokens.release(reference)
        self.records[Int(slot)].token = .none
        self.platformCodes[Int(slot)] |= Self.tokenlessBit
        self.evacuateTokenChunks()
    }

    mutating func touch(slot: UInt32, now: Timestamp) {
        if now.millisecondsSinceEpoch > self.records[Int(slot)].lastSeen {
            self.records[Int(slot)].lastSeen = now.millisecondsSinceEpoch
        }
    }

    mutating func setUser(_ user: UserID?, atSlot slot: UInt32) {
        let number = user.map { self.users.bind($0) } ?? 0
        self.users.unbind(self.records[Int(slot)].user)
        self.records[Int(slot)].user = number
    }

    /// Deletes the installation at `slot`: its FID and token are retired and the slot is freed.
    /// The caller cascades subscriptions and the user binding first.
    mutating func delete(slot: UInt32) {
        guard self.isLive(slot) else { return }
        let fid = self.records[Int(slot)].fid
        self.dropToken(atSlot: slot)
        if let apnsToken = self.apnsToken(ofSlot: slot) { self.slotByAPNsToken[apnsToken] = nil }
        self.credentialDigests[slot] = nil  // its refresh and auth tokens stop working
        self.slotByFID.remove(hash: fid.hashValue, slot: slot)
        self.retiredFIDs.insert(fid)
        self.setUser(nil, atSlot: slot)
        self.records[Int(slot)].extras = nil
        self.platformCodes[Int(slot)] = 0
        self.liveSlots.remove(slot)
        self.freeSlots.append(slot)
    }

    /// Live slots whose last-seen time is before `cutoff`.
    func slots(lastSeenBefore cutoff: Timestamp) -> [UInt32] {
        var result: [UInt32] = []
        self.liveSlots.forEach { slot in
            if self.records[Int(slot)].lastSeen < cutoff.millisecondsSinceEpoch {
                result.append(slot)
            }
        }
        return result
    }

    // MARK: - Tombstones

    /// The retired FIDs and token hashes (for snapshots), sorted for a stable output.
    var tombstones: (fids: [FID], tokenHashes: [UInt64]) {
        (self.retiredFIDs.sorted { $0.string < $1.string }, self.retiredTokens.sorted())
    }

    /// How many FIDs and token hashes are retired.
    var tombstoneCounts: (fids: Int, tokenHashes: Int) {
        (self.retiredFIDs.count, self.retiredTokens.count)
    }

    /// How many records a snapshot writes for the installations: a register for each, a touch for
    /// each seen since it registered, a credential for each that has one.
    var snapshotRecordCount: Int {
        var count = self.liveSlots.count
        self.liveSlots.forEach { slot in
            let record = self.records[Int(slot)]
            if record.lastSeen != record.createdAt { count += 1 }
        }
        return count + self.credentialDigests.keys.count { self.isLive($0) }
    }

    mutating func restoreRetired(fids: [FID]) {
        self.retiredFIDs.formUnion(fids)
    }

    mutating func restoreRetired(tokenHashes: [UInt64]) {
        self.retiredTokens.formUnion(tokenHashes)
    }

    // MARK: - Slot layout

    /// The free slots in the order they will be reused (last first), for snapshots.
    var freeSlotList: [UInt32] { self.freeSlots }

    /// Prepares an empty registry to be restored with the same slots a snapshot was taken with:
    /// registrations replayed next in ascending slot order take the live slots (every slot below
    /// `capacity` not in `freeSlots`), and then `freeSlots` is the free list again.
    /// - Returns: false when the registry is not empty or a free slot is out of range (nothing changed).
    mutating func prepareLayout(capacity: Int, freeSlots: [UInt32]) -> Bool {
        guard self.records.isEmpty, freeSlots.allSatisfy({ Int($0) < capacity }) else { return false }
        let free = Set(freeSlots)
        guard free.count == freeSlots.count else { return false }
        self.records = ReallocatedArray(repeating: .unused, count: capacity)
        self.platformCodes = Array(repeating: 0, count: capacity)
        self.freeSlots = freeSlots + (0..<UInt32(capacity)).reversed().filter { !free.contains($0) }
        return true
    }

    // MARK: - Helpers

    private mutating func allocateSlot() -> UInt32 {
        if let slot = self.freeSlots.popLast() {
            return slot
        }
        let slot = UInt32(self.records.count)
        self.platformCodes.append(0)
        self.records.append(.unused)
        return slot
    }

    /// FNV-1a 64 of the token bytes: stable across processes (unlike `Hasher`), so tombstones can be
    /// persisted. A false positive (a fresh token refused as retired) has probability ~1e-19 per pair.
    static func stableHash(_ token: RegistrationToken) -> UInt64 {
        token.withUTF8 { FNV1a.hash64($0) }
    }

    /// The hash the token index files a token under, of its bytes (as the arena holds them):
    /// keyed SipHash-1-3, as `Hasher` is, at 2.5 times its speed on a token.
    static func tokenHash(_ bytes: UnsafeRawBufferPointer) -> Int {
        Int(truncatingIfNeeded: SipHash.process.hash13(bytes))
    }

    /// `tokenHash` of each of `ranges` of `bytes`, in order.
    static func tokenHashes(of ranges: [Range<Int>], in bytes: UnsafeRawBufferPointer) -> [Int] {
        SipHash.process.hashes13(of: ranges, in: bytes).map { Int(truncatingIfNeeded: $0) }
    }

    static func tokenHash(_ token: RegistrationToken) -> Int {
        token.withUTF8(Self.tokenHash)
    }

    // MARK: - Token storage

    /// - Throws: `RESOURCE_EXHAUSTED` when the project's tokens fill the arena (4 GiB).
    private func checkTokenRoom() throws(FanoutError) {
        guard self.tokens.hasRoom else {
            throw FanoutError(.resourceExhausted, "the project's registration tokens fill 4 GiB, the most it holds", field: "token")
        }
    }

    private mutating func storeToken(_ token: RegistrationToken, atSlot slot: UInt32) -> TokenReference {
        token.withUTF8 { self.tokens.append($0, slot: slot) }
    }

    /// Moves the tokens still referenced out of chunks that are mostly released, and frees those
    /// chunks (`TokenArena`).
    private mutating func evacuateTokenChunks() {
        while let chunk = self.tokens.evacuationCandidates.last {
            for entry in self.tokens.entries(inChunk: chunk) where self.records[Int(entry.slot)].token == entry.reference {
                // A stored token keeps its chunk alive while the arena appends its copy.
                let stored = self.tokens.storedToken(entry.reference)
                self.records[Int(entry.slot)].token = stored.withUnsafeBytes { self.tokens.append($0, slot: entry.slot) }
            }
            self.tokens.drop(chunk: chunk)
        }
    }
}
