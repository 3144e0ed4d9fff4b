import FanoutModel

/// The records that rebuild a project's state exactly, for a snapshot: the slot layout, the
/// installations (in their slots) with their creation and last-seen times and credentials, users
/// with their kind and last activity, bindings, subscriptions, the tombstones of deleted FIDs and
/// retired tokens, and the messages with pending deliveries. Made one at a time as the snapshot's
/// writer asks for them: made all at once, a snapshot of 1M installations held about 470 MB of
/// records (fanoutd's RSS went from 389 MB to 855 MB while it wrote one, and stayed at 608 MB).
/// Only what is small or bounded by pending deliveries is made ahead: the sorted users and topic
/// names, and the message records.
struct SnapshotRecords {
    private let state: ProjectState
    private var phase = Phase.layout
    /// Records made for the current step and not handed out yet (an installation's touch and
    /// credential after its register), in reverse order.
    private var queued: [WALRecord] = []
    private let users: [(UserID, UserRecord)]
    private let topics: [TopicName]
    private let messages: [WALRecord]

    private enum Phase {
        case layout
        case installations(nextSlot: UInt32)
        case users(next: Int)
        case topics(next: Int)
        case tail
        case done
    }

    init(_ state: ProjectState) {
        self.state = state
        self.users = state.users.sorted { $0.key < $1.key }
        self.topics = state.topics.allTopics().map(\.name)
        self.messages = state.snapshotMessageRecords()
    }

    /// How many records `next()` hands out in all, counted without making them.
    var count: Int {
        let registry = self.state.registry
        var count = 1 + (self.state.acceptsLegacyInstanceIDs ? 1 : 0) + registry.snapshotRecordCount
        for (_, record) in self.users {
            count += 1 + record.devices.count { registry.isLive($0) }
        }
        count += self.topics.count + (self.state.anonymousCleanupEnabledAt == nil ? 0 : 1)
        let (retiredFIDs, retiredTokens) = registry.tombstoneCounts
        count += (retiredFIDs > 0 ? 1 : 0) + (retiredTokens > 0 ? 1 : 0)
        return count + self.messages.count
    }

    /// The next record; nil after the last.
    mutating func next() -> WALRecord? {
        while true {
            if let record = self.queued.popLast() { return record }
            let project = self.state.id
            switch self.phase {
            case .layout:
                self.phase = .installations(nextSlot: 0)
                if self.state.acceptsLegacyInstanceIDs { self.queued.append(.setLegacyInstanceIDs(project, accepted: true)) }
                return .restoreSlotLayout(project, capacity: UInt32(self.state.registry.slotCapacity), freeSlots: self.state.registry.freeSlotList)
            case .installations(let slot):
                // The registry is read through `self.state` each time: a local copy of it retained
                // and released each of its references, for every record.
                guard Int(slot) < self.state.registry.slotCapacity else {
                    self.phase = .users(next: 0)
                    continue
                }
                self.phase = .installations(nextSlot: slot + 1)
                guard let i = self.state.registry.installation(atSlot: slot) else { continue }
                if let digest = self.state.registry.credentialDigest(ofSlot: slot) { self.queued.append(.setCredential(project, fid: i.fid, digest: digest)) }
                if i.lastSeen != i.createdAt { self.queued.append(.touch(project, fid: i.fid, at: i.lastSeen)) }
                return .register(
                    project, .init(fid: i.fid, token: i.token, platform: i.platform, appID: i.appID, device: i.device, apnsToken: i.apnsToken, at: i.createdAt)
                )
            case .users(let index):
                guard index < self.users.count else {
                    self.phase = .topics(next: 0)
                    continue
                }
                self.phase = .users(next: index + 1)
                let (user, record) = self.users[index]
                for slot in record.devices.reversed() {
                    guard let fid = self.state.registry.fid(ofSlot: slot) else { continue }
                    // Binding at time 0 keeps the restored last activity (binding takes the later of the two).
                    self.queued.append(.bindDevice(project, fid: fid, user: user, anonymous: record.isAnonymous, at: Timestamp(millisecondsSinceEpoch: 0)))
                }
                return .restoreUserCreated(
                    project, user: user, anonymous: record.isAnonymous, createdAt: Timestamp(millisecondsSinceEpoch: record.createdAt),
                    lastActive: Timestamp(millisecondsSinceEpoch: record.lastActive)
                )
            case .topics(let index):
                guard index < self.topics.count else {
                    self.phase = .tail
                    continue
                }
                self.phase = .topics(next: index + 1)
                // The layout record puts every installation back in its slot, so subscribers are
                // stored as slots (4 bytes each, not an 18-byte FID).
                let topic = self.topics[index]
                return .restoreSubscribers(project, topic: topic, ordinals: self.state.topics.subscribers(of: topic).slots)
            case .tail:
                self.phase = .done
                var tail: [WALRecord] = []
                if let enabledAt = self.state.anonymousCleanupEnabledAt {
                    tail.append(.setAnonymousCleanup(project, enabledAt: Timestamp(millisecondsSinceEpoch: enabledAt)))
                }
                let (retiredFIDs, retiredTokens) = self.state.registry.tombstones
                if !retiredFIDs.isEmpty { tail.append(.retireFIDs(project, fids: retiredFIDs)) }
                if !retiredTokens.isEmpty { tail.append(.retireTokenHashes(project, hashes: retiredTokens)) }
                tail += self.messages
                self.queued = tail.reversed()
            case .done:
                return nil
            }
        }
    }
}
