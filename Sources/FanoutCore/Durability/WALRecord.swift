/// One logical state change of the engine, as the write-ahead log stores it. Replaying the records
/// in order into an empty engine gives the state that was acknowledged: installations are
/// addressed by FID (the engine resolves tokens before logging), registrations carry the FID that
/// was assigned, and every time-dependent change carries the time it was made.
package enum WALRecord: Hashable, Sendable {
    case createProject(ProjectID)
    case deleteProject(ProjectID)
    case register(ProjectID, RegisteredInstallation)
    /// A register batch's registration, its fields encoded before the project's lock: written as
    /// `register` is (the same bytes), never read back as this.
    case registerEncoded(ProjectID, EncodedRegistration)
    case refreshToken(ProjectID, fid: FID, token: RegistrationToken, at: Timestamp)
    case touch(ProjectID, fid: FID, at: Timestamp)
    /// An installation's APNs device token set (taken from whoever had it) or cleared.
    case setAPNsToken(ProjectID, fid: FID, token: APNsDeviceToken?)
    /// The project's acceptance of legacy 11-character Instance IDs turned on or off.
    case setLegacyInstanceIDs(ProjectID, accepted: Bool)
    /// An installation's credentials issued or replaced: the SHA-256 of its refresh token.
    case setCredential(ProjectID, fid: FID, digest: [UInt8])
    case deleteInstallation(ProjectID, fid: FID)
    case bindDevice(ProjectID, fid: FID, user: UserID, anonymous: Bool, at: Timestamp)
    case signOut(ProjectID, user: UserID, fid: FID)
    case linkUser(ProjectID, anonymous: UserID, permanent: UserID, at: Timestamp)
    /// Read only: what older builds logged (the cutoff came from the configuration at replay).
    case cleanUpAnonymousUsers(ProjectID, at: Timestamp)
    /// Read only, as `cleanUpAnonymousUsers`.
    case pruneExpiredInstallations(ProjectID, at: Timestamp)
    /// Anonymous users removed by a clean-up (their devices stay, unbound).
    case removeAnonymousUsers(ProjectID, users: [UserID])
    /// Installations last seen before `cutoff` deleted with everything they own.
    case pruneLastSeenBefore(ProjectID, cutoff: Timestamp)
    /// The project's automatic anonymous clean-up turned on (since `enabledAt`) or off (`nil`).
    case setAnonymousCleanup(ProjectID, enabledAt: Timestamp?)
    /// The installations that were subscribed, by slot (each checked against its FID on replay),
    /// in the order of the request.
    case subscribe(ProjectID, topic: TopicName, installations: [SlotReference])
    case unsubscribe(ProjectID, topic: TopicName, installations: [SlotReference])
    /// Subscriptions by FID, as builds before slot references logged them. Read, never written.
    case subscribeFIDs(ProjectID, topic: TopicName, fids: [FID])
    case unsubscribeFIDs(ProjectID, topic: TopicName, fids: [FID])
    /// A user as a snapshot restores it (kind and last activity; devices follow as `bindDevice`).
    /// Read only: a snapshot's user before users had a creation time.
    case restoreUser(ProjectID, user: UserID, anonymous: Bool, lastActive: Timestamp)
    /// A snapshot's user (its devices follow as `bindDevice` records).
    case restoreUserCreated(ProjectID, user: UserID, anonymous: Bool, createdAt: Timestamp, lastActive: Timestamp)
    /// FIDs of deleted installations (tombstones), as a snapshot restores them.
    case retireFIDs(ProjectID, fids: [FID])
    /// Hashes of retired tokens (tombstones), as a snapshot restores them.
    case retireTokenHashes(ProjectID, hashes: [UInt64])
    /// A topic's subscribers in a snapshot, as ordinals of the snapshot's registrations (ascending):
    /// restored registrations take slots 0, 1, 2, ... in order, so an ordinal is the restored slot.
    case restoreSubscribers(ProjectID, topic: TopicName, ordinals: [UInt32])
    /// The registry's slot layout in a snapshot, before its registrations: the slot count and the
    /// free list. The registrations that follow (ascending slots) take the other slots, so every
    /// installation keeps its slot across a restart, and subscriber ordinals are those slots.
    case restoreSlotLayout(ProjectID, capacity: UInt32, freeSlots: [UInt32])
    /// A send: the message as it was validated and rendered (target, delivery options, the three
    /// payloads, acceptance time), with the sequence number of its message id; replay resolves the
    /// same audience, since it replays everything before it in order, and never parses it again.
    case send(ProjectID, sequence: UInt64, message: RenderedMessage)
    /// A send as builds before the rendered record logged it: the request body, parsed and
    /// rendered again on replay. Read, never written.
    case sendBody(ProjectID, sequence: UInt64, at: Timestamp, body: [UInt8])
    /// Deliveries acknowledged by consumers.
    case acknowledge(ProjectID, deliveries: [DeliveryID])
    /// An expiry sweep at a time: every delivery that expired by then left its mailbox.
    case expireDeliveries(ProjectID, at: Timestamp)
    /// A message with pending deliveries in a snapshot: its sequence, the rendered message, the
    /// slots it waits in (ascending) and the slots where its "deleted messages" marker waits.
    case restoreMessage(ProjectID, sequence: UInt64, message: RenderedMessage, slots: [UInt32], markerSlots: [UInt32])
    /// The same as older builds wrote it, with the request body in place of the rendered message.
    /// Read, never written.
    case restoreMessageBody(ProjectID, sequence: UInt64, at: Timestamp, body: [UInt8], slots: [UInt32], markerSlots: [UInt32])
    /// The sequence number of the project's next message, in a snapshot.
    case restoreMessageSequence(ProjectID, next: UInt64)

    /// A registration as it was applied (with the FID the engine chose).
    package struct RegisteredInstallation: Hashable, Sendable {
        // `Optional<T>`, not `T?`: see `RegistrationRequest`.
        package var fid: FID
        package var token: Optional<RegistrationToken>
        package var platform: Platform
        package var appID: AppID
        package var device: DeviceDetails
        package var apnsToken: Optional<APNsDeviceToken>
        package var at: Timestamp

        package init(
            fid: FID,
            token: RegistrationToken?,
            platform: Platform,
            appID: AppID,
            device: DeviceDetails,
            apnsToken: APNsDeviceToken?,
            at: Timestamp
        ) {
            self.fid = fid
            self.token = token
            self.platform = platform
            self.appID = appID
            self.device = device
            self.apnsToken = apnsToken
            self.at = at
        }

        /// The record of `request`, registered at `at` with `fid`.
        init(_ request: RegistrationRequest, fid: FID, at: Timestamp) {
            self.init(fid: fid, token: request.token, platform: request.platform, appID: request.appID, device: request.device, apnsToken: request.apnsToken, at: at)
        }
    }

    /// A registration whose fields between the FID and the time (token, platform, app id, device
    /// details, APNs token) are encoded already, as `register` writes them: a register batch
    /// encodes its items' fields before the project's lock (`RegistrationItems`), and its records
    /// refer to those bytes instead of holding copies of each item's tokens and strings, which
    /// the log's writer would encode again.
    package struct EncodedRegistration: Hashable, Sendable {
        package var fid: FID
        /// The encoded fields of every item of the batch; this one's are `range`.
        package var batchFields: [UInt8]
        package var range: Range<Int>
        package var at: Timestamp

        package init(fid: FID, batchFields: [UInt8], range: Range<Int>, at: Timestamp) {
            self.fid = fid
            self.batchFields = batchFields
            self.range = range
            self.at = at
        }

        package static func == (left: Self, right: Self) -> Bool {
            left.fid == right.fid && left.at == right.at && left.batchFields[left.range] == right.batchFields[right.range]
        }

        package func hash(into hasher: inout Hasher) {
            hasher.combine(self.fid)
            hasher.combine(self.at)
            self.batchFields.withUnsafeBytes { hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: $0[self.range])) }
        }
    }

    /// The record's type byte on disk (docs/wal-format.md). Never renumber.
    enum Kind: UInt8 {
        case createProject = 1
        case deleteProject = 2
        case register = 3
        case refreshToken = 4
        case touch = 5
        case deleteInstallation = 6
        case bindDevice = 7
        case signOut = 8
        case linkUser = 9
        case cleanUpAnonymousUsers = 10
        case pruneExpiredInstallations = 11
        case subscribeFIDs = 12
        case unsubscribeFIDs = 13
        case restoreUser = 14
        case retireFIDs = 15
        case retireTokenHashes = 16
        case restoreSubscribers = 17
        case restoreSlotLayout = 18
        case sendBody = 19
        case acknowledge = 20
        case expireDeliveries = 21
        case restoreMessageBody = 22
        case restoreMessageSequence = 23
        case send = 24
        case restoreMessage = 25
        case subscribe = 26
        case unsubscribe = 27
        case setAPNsToken = 28
        case removeAnonymousUsers = 29
        case pruneLastSeenBefore = 30
        case setAnonymousCleanup = 31
        case restoreUserCreated = 32
        case setCredential = 33
        case setLegacyInstanceIDs = 34
    }

    /// A one-line description with tokens redacted (for `fanout wal inspect`).
    package var summary: String {
        switch self {
        case .createProject(let project): return "createProject \(project)"
        case .deleteProject(let project): return "deleteProject \(project)"
        case .register(let project, let r):
            return "register \(project) fid=\(r.fid) platform=\(r.platform) token=\(r.token?.description ?? "none") at=\(r.at)"
        case .registerEncoded:
            return (try? self.decodedRegistration)?.summary ?? "register (its fields do not decode)"
        case .refreshToken(let project, let fid, let token, let at): return "refreshToken \(project) fid=\(fid) token=\(token) at=\(at)"
        case .touch(let project, let fid, let at): return "touch \(project) fid=\(fid) at=\(at)"
        case .setAPNsToken(let project, let fid, let token): return "setAPNsToken \(project) fid=\(fid) token=\(token?.description ?? "none")"
        case .setCredential(let project, let fid, _): return "setCredential \(project) fid=\(fid)"
        case .setLegacyInstanceIDs(let project, let accepted): return "setLegacyInstanceIDs \(project) accepted=\(accepted)"
        case .deleteInstallation(let project, let fid): return "deleteInstallation \(project) fid=\(fid)"
        case .bindDevice(let project, let fid, let user, let anonymous, let at):
            return "bindDevice \(project) fid=\(fid) user=\(user) anonymous=\(anonymous) at=\(at)"
        case .signOut(let project, let user, let fid): return "signOut \(project) user=\(user) fid=\(fid)"
        case .linkUser(let project, let anonymous, let permanent, let at):
            return "linkUser \(project) anonymous=\(anonymous) permanent=\(permanent) at=\(at)"
        case .cleanUpAnonymousUsers(let project, let at): return "cleanUpAnonymousUsers \(project) at=\(at)"
        case .pruneExpiredInstallations(let project, let at): return "pruneExpiredInstallations \(project) at=\(at)"
        case .removeAnonymousUsers(let project, let users): return "removeAnonymousUsers \(project) count=\(users.count)"
        case .pruneLastSeenBefore(let project, let cutoff): return "pruneLastSeenBefore \(project) cutoff=\(cutoff)"
        case .setAnonymousCleanup(let project, let enabledAt): return "setAnonymousCleanup \(project) enabledAt=\(enabledAt?.description ?? "off")"
        case .restoreUserCreated(let project, let user, let anonymous, let createdAt, let lastActive):
            return "restoreUser \(project) user=\(user) anonymous=\(anonymous) createdAt=\(createdAt) lastActive=\(lastActive)"
        case .subscribe(let project, let topic, let installations): return "subscribe \(project) topic=\(topic) count=\(installations.count)"
        case .unsubscribe(let project, let topic, let installations): return "unsubscribe \(project) topic=\(topic) count=\(installations.count)"
        case .subscribeFIDs(let project, let topic, let fids): return "subscribe \(project) topic=\(topic) count=\(fids.count) (by FID)"
        case .unsubscribeFIDs(let project, let topic, let fids): return "unsubscribe \(project) topic=\(topic) count=\(fids.count) (by FID)"
        case .restoreUser(let project, let user, let anonymous, let lastActive):
            return "restoreUser \(project) user=\(user) anonymous=\(anonymous) lastActive=\(lastActive)"
        case .retireFIDs(let project, let fids): return "retireFIDs \(project) count=\(fids.count)"
        case .retireTokenHashes(let project, let hashes): return "retireTokenHashes \(project) count=\(hashes.count)"
        case .restoreSubscribers(let project, let topic, let ordinals):
            return "restoreSubscribers \(project) topic=\(topic) count=\(ordinals.count)"
        case .restoreSlotLayout(let project, let capacity, let freeSlots):
            return "restoreSlotLayout \(project) capacity=\(capacity) free=\(freeSlots.count)"
        case .send(let project, let sequence, let message):
            return "send \(project) message=\(sequence) target=\(message.target.kind) bytes=\(message.renderedByteCount) at=\(message.acceptedAt)"
        case .sendBody(let project, let sequence, let at, let body):
            return "send \(project) message=\(sequence) body-bytes=\(body.count) at=\(at)"
        case .acknowledge(let project, let deliveries):
            return "acknowledge \(project) count=\(deliveries.count)"
        case .expireDeliveries(let project, let at):
            return "expireDeliveries \(project) at=\(at)"
        case .restoreMessage(let project, let sequence, let message, let slots, let markerSlots):
            return "restoreMessage \(project) message=\(sequence) bytes=\(message.renderedByteCount) at=\(message.acceptedAt) pending=\(slots.count) markers=\(markerSlots.count)"
        case .restoreMessageBody(let project, let sequence, let at, let body, let slots, let markerSlots):
            return "restoreMessage \(project) message=\(sequence) body-bytes=\(body.count) at=\(at) pending=\(slots.count) markers=\(markerSlots.count)"
        case .restoreMessageSequence(let project, let next):
            return "restoreMessageSequence \(project) next=\(next)"
        }
    }
}

/// An installation as a subscription record names it: its slot (which a snapshot keeps, see
/// `restoreSlotLayout`) and 16 bits of its FID, which replay checks so that a log that disagrees
/// with itself is refused rather than applied to another installation. 6 bytes in the log, where
/// a FID took 18, and no hash lookup to replay.
package struct SlotReference: Hashable, Sendable {
    package var slot: UInt32
    package var check: UInt16

    /// Bytes in the log: `u32 slot | u16 check`.
    static let encodedSize = 6

    package init(slot: UInt32, check: UInt16) {
        self.slot = slot
        self.check = check
    }

    package init(slot: UInt32, fid: FID) {
        self.init(slot: slot, check: Self.check(of: fid))
    }

    /// The 16 bits of a FID a reference carries (from the middle of its random part).
    package static func check(of fid: FID) -> UInt16 {
        UInt16(truncatingIfNeeded: fid.packed.middle)
    }
}
