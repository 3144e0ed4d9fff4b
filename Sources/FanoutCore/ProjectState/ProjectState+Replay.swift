extension ProjectState {
    /// Applies one logged change, as the engine applied it when it was acknowledged.
    /// - Throws: `INTERNAL` when the record cannot apply (the log disagrees with itself).
    mutating func replay(_ record: WALRecord) throws(FanoutError) {
        self.makesRecords = false
        defer { self.makesRecords = true }
        switch record {
        case .createProject, .deleteProject:
            break  // handled by the engine's project map
        case .registerEncoded:
            try self.replay(try record.decodedRegistration)
        case .register(_, let r):
            // The logged FID as it is (no round trip through its string form), accepted when it
            // was given; no description of the installation made (`InstallationRegistry.add`).
            let request = RegistrationRequest(token: r.token, platform: r.platform, appID: r.appID, device: r.device, apnsToken: r.apnsToken)
            let keys = RegistrationKeys(request, logged: r.fid)
            if case .new(_, _, _, fidWasAssigned: true) = try self.registry.add(request, keys: keys, accepting: nil, now: r.at) {
                throw FanoutError(.internal, "replay: the logged FID \(r.fid) was not free")
            }
        case .refreshToken(_, let fid, let token, let at):
            _ = try self.refreshToken(.fid(fid), to: token, now: at)
        case .touch(_, let fid, let at):
            _ = try self.touch(.fid(fid), now: at)
        case .setAPNsToken(_, let fid, let token):
            _ = try self.setAPNsToken(token, of: .fid(fid))
        case .setLegacyInstanceIDs(_, let accepted):
            _ = self.setLegacyInstanceIDs(accepted)
        case .setCredential(_, let fid, let digest):
            _ = try self.setCredential(digest, of: .fid(fid))
        case .deleteInstallation(_, let fid):
            _ = try self.delete(fid)
        case .bindDevice(_, let fid, let user, let anonymous, let at):
            _ = try self.bind(.fid(fid), to: user, anonymous: anonymous, now: at)
        case .signOut(_, let user, let fid):
            _ = try self.signOut(user, on: .fid(fid))
        case .linkUser(_, let anonymous, let permanent, let at):
            _ = try self.link(anonymous: anonymous, to: permanent, now: at)
        case .cleanUpAnonymousUsers(_, let at):
            // Older builds removed anonymous users idle for the configured lifetime.
            let cutoff = at.advanced(by: .zero - self.configuration.anonymousUserLifetime).millisecondsSinceEpoch
            self.removeUsers(self.users.filter { $0.value.isAnonymous && $0.value.lastActive < cutoff }.keys.sorted())
        case .pruneExpiredInstallations(_, let at):
            _ = self.prune(lastSeenBefore: at.advanced(by: .zero - self.configuration.expireAfter))
        case .removeAnonymousUsers(_, let users):
            self.removeUsers(users)
        case .pruneLastSeenBefore(_, let cutoff):
            _ = self.prune(lastSeenBefore: cutoff)
        case .setAnonymousCleanup(_, let enabledAt):
            _ = self.setAnonymousCleanup(enabledAt)
        case .restoreUserCreated(_, let user, let anonymous, let createdAt, let lastActive):
            guard self.users[user] == nil else { throw FanoutError(.internal, "replay: user \(user) restored twice") }
            self.users[user] = UserRecord(
                isAnonymous: anonymous, devices: [], lastActive: lastActive.millisecondsSinceEpoch, createdAt: createdAt.millisecondsSinceEpoch
            )
        case .subscribe(_, let topic, let installations):
            let (id, added) = try self.replaySubscriptionSet(installations, to: topic)
            if let slot = self.topics.appendReplayed(id, to: added) {
                throw FanoutError(.internal, "replay: a subscription to \(topic) names slot \(slot), which already has the most topics a slot can have (65535)")
            }
        case .unsubscribe(_, let topic, let installations):
            self.topics.unsubscribe(try self.slots(of: installations, topic: topic), from: topic)
        case .subscribeFIDs(_, let topic, let fids):
            _ = self.topics.subscribe(fids.compactMap { self.registry.slot(forFID: $0) }, to: topic)
        case .unsubscribeFIDs(_, let topic, let fids):
            self.topics.unsubscribe(fids.compactMap { self.registry.slot(forFID: $0) }, from: topic)
        case .restoreUser(_, let user, let anonymous, let lastActive):
            guard self.users[user] == nil else { throw FanoutError(.internal, "replay: user \(user) restored twice") }
            // Created at an unknown time: its last activity stands for it.
            self.users[user] = UserRecord(
                isAnonymous: anonymous, devices: [], lastActive: lastActive.millisecondsSinceEpoch, createdAt: lastActive.millisecondsSinceEpoch
            )
        case .retireFIDs(_, let fids):
            self.registry.restoreRetired(fids: fids)
        case .retireTokenHashes(_, let hashes):
            self.registry.restoreRetired(tokenHashes: hashes)
        case .restoreSubscribers(_, let topic, let ordinals):
            // An ordinal is the slot the installation was restored to: its own slot after a
            // `restoreSlotLayout`, else 0, 1, 2, ... in the order of the registrations.
            guard ordinals.allSatisfy({ self.registry.isLive($0) }) else {
                throw FanoutError(.internal, "replay: a subscriber ordinal of topic \(topic) is not a restored installation")
            }
            guard self.topics.restore(ordinals, to: topic) else {
                throw FanoutError(.internal, "replay: topic \(topic) restored twice")
            }
        case .restoreSlotLayout(_, let capacity, let freeSlots):
            guard self.registry.prepareLayout(capacity: Int(capacity), freeSlots: freeSlots) else {
                throw FanoutError(.internal, "replay: a slot layout for a registry that is not empty, or with bad free slots")
            }
        case .send(_, let sequence, let message):
            try self.replaySend(message, sequence: sequence)
        case .sendBody(_, let sequence, let at, let body):
            try self.replaySend(try Self.renderLogged(body, at: at), sequence: sequence)
        case .acknowledge(_, let deliveries):
            self.replayAcknowledgements(deliveries)
        case .expireDeliveries(_, let at):
            _ = self.expireDeliveries(now: at)
        case .restoreMessage(_, let sequence, let message, let slots, let markerSlots):
            try self.restoreMessage(message, sequence: sequence, slots: slots, markerSlots: markerSlots)
        case .restoreMessageBody(_, let sequence, let at, let body, let slots, let markerSlots):
            try self.restoreMessage(try Self.renderLogged(body, at: at), sequence: sequence, slots: slots, markerSlots: markerSlots)
        case .restoreMessageSequence(_, let next):
            self.deliveries.nextSequence = max(self.deliveries.nextSequence, next)
        }
    }

    /// Replays a subscription record up to its topic's set: checks the installations it names and
    /// adds them to the set, straight to the index (the batch limit and the per-installation limit
    /// are rules for requests, which admitted these). Returns the topic's id and the slots it
    /// gained, whose reverse-list entries are still to be made (`TopicIndex.appendReplayed`).
    mutating func replaySubscriptionSet(_ installations: [SlotReference], to topic: TopicName) throws(FanoutError) -> (id: UInt32, added: [UInt32]) {
        let slots = try self.slots(of: installations, topic: topic)
        return self.topics.insertReplayed(slots, into: topic)
    }

    /// The slots a subscription record names, each checked against the installation there.
    /// - Throws: `INTERNAL` when a slot is empty or holds another installation (the log disagrees
    ///   with itself).
    private func slots(of installations: [SlotReference], topic: TopicName) throws(FanoutError) -> [UInt32] {
        var slots: [UInt32] = []
        slots.reserveCapacity(installations.count)
        self.registry.prefetchRecords(of: installations.lazy.map(\.slot))
        for installation in installations {
            guard let fid = self.registry.fid(ofSlot: installation.slot), SlotReference.check(of: fid) == installation.check else {
                throw FanoutError(.internal, "replay: a subscription to \(topic) names slot \(installation.slot), which does not hold that installation")
            }
            slots.append(installation.slot)
        }
        return slots
    }
}

extension WALRecord {
    /// The project the record belongs to.
    var project: ProjectID {
        switch self {
        case .createProject(let p), .deleteProject(let p), .register(let p, _), .registerEncoded(let p, _), .refreshToken(let p, _, _, _),
            .touch(let p, _, _), .setAPNsToken(let p, _, _), .setCredential(let p, _, _), .setLegacyInstanceIDs(let p, _), .deleteInstallation(let p, _), .bindDevice(let p, _, _, _, _), .signOut(let p, _, _),
            .linkUser(let p, _, _, _), .cleanUpAnonymousUsers(let p, _), .pruneExpiredInstallations(let p, _),
            .removeAnonymousUsers(let p, _), .pruneLastSeenBefore(let p, _), .setAnonymousCleanup(let p, _), .restoreUserCreated(let p, _, _, _, _),
            .subscribe(let p, _, _), .unsubscribe(let p, _, _), .subscribeFIDs(let p, _, _), .unsubscribeFIDs(let p, _, _), .restoreUser(let p, _, _, _), .retireFIDs(let p, _),
            .retireTokenHashes(let p, _), .restoreSubscribers(let p, _, _), .restoreSlotLayout(let p, _, _),
            .send(let p, _, _), .sendBody(let p, _, _, _), .acknowledge(let p, _), .expireDeliveries(let p, _),
            .restoreMessage(let p, _, _, _, _), .restoreMessageBody(let p, _, _, _, _, _), .restoreMessageSequence(let p, _):
            return p
        }
    }
}
