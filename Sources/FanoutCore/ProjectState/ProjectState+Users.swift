extension FanoutError {
    /// A bind to an existing user of the other kind (anonymous or permanent) than asked.
    package static func userOfTheOtherKind(isAnonymous: Bool) -> FanoutError {
        FanoutError(
            .failedPrecondition,
            isAnonymous ? "the user is anonymous; link it to a permanent user instead" : "the user is permanent and cannot be bound as anonymous",
            field: "user"
        )
    }

    /// A link whose permanent user exists as an anonymous one.
    package static let linkTargetIsAnonymous = FanoutError(.failedPrecondition, "the target user is anonymous", field: "permanentUser")
}

/// Users and their devices (the device-store model).
extension ProjectState {
    /// Binds an installation to `user`, creating the user on first use. A device bound to another
    /// user moves. Binding to an existing user of the other kind (anonymous vs permanent) fails.
    mutating func bind(
        _ address: RegistrationAddress,
        to user: UserID,
        anonymous: Bool,
        now: Timestamp
    ) throws(FanoutError) -> Logged<Installation> {
        let slot = try self.slot(for: address)
        if let existing = self.users[user], existing.isAnonymous != anonymous {
            throw .userOfTheOtherKind(isAnonymous: existing.isAnonymous)
        }
        if self.registry.user(ofSlot: slot) != user {
            self.unbind(slot)
            let created = UserRecord(isAnonymous: anonymous, devices: [], lastActive: 0, createdAt: now.millisecondsSinceEpoch)
            self.users[user, default: created].devices.append(slot)
            self.registry.setUser(user, atSlot: slot)
        } else if self.users[user] == nil {
            self.users[user] = UserRecord(isAnonymous: anonymous, devices: [slot], lastActive: 0, createdAt: now.millisecondsSinceEpoch)
        }
        self.users[user]!.lastActive = max(self.users[user]!.lastActive, now.millisecondsSinceEpoch)
        let installation = self.registry.installation(atSlot: slot)!
        return self.logged(installation, .bindDevice(self.id, fid: installation.fid, user: user, anonymous: anonymous, at: now))
    }

    /// Signs `user` out on one device: the device is unbound, its token is dropped (it is
    /// `UNREGISTERED` from now on) and so are the deliveries waiting for it, before this returns.
    /// - Throws: `PERMISSION_DENIED` when the installation is not one of `user`'s devices.
    mutating func signOut(_ user: UserID, on address: RegistrationAddress) throws(FanoutError) -> Logged<Installation> {
        let slot = try self.slot(for: address)
        guard self.registry.user(ofSlot: slot) == user else {
            throw FanoutError(.failedPrecondition, "the installation is not one of the user's devices", field: "registration")
        }
        self.unbind(slot)
        self.registry.dropToken(atSlot: slot)
        self.dropPendingDeliveries(slot)
        let installation = self.registry.installation(atSlot: slot)!
        return self.logged(installation, .signOut(self.id, user: user, fid: installation.fid))
    }

    /// Links an anonymous user to a permanent one: the permanent user (created if needed) takes
    /// over every device, and the anonymous user is gone.
    mutating func link(anonymous: UserID, to permanent: UserID, now: Timestamp) throws(FanoutError) -> Logged<User> {
        guard anonymous != permanent else {
            throw .invalidArgument("a user cannot be linked to itself", field: "permanentUser")
        }
        guard let source = self.users[anonymous] else {
            throw .notFound("no such user", field: "anonymousUser")
        }
        guard source.isAnonymous else {
            throw FanoutError(.failedPrecondition, "the user to link is not anonymous", field: "anonymousUser")
        }
        if let target = self.users[permanent], target.isAnonymous {
            throw .linkTargetIsAnonymous
        }
        self.users[anonymous] = nil
        var target = self.users[permanent] ?? UserRecord(isAnonymous: false, devices: [], lastActive: 0, createdAt: now.millisecondsSinceEpoch)
        for slot in source.devices {
            target.devices.append(slot)
            self.registry.setUser(permanent, atSlot: slot)
        }
        target.lastActive = max(target.lastActive, now.millisecondsSinceEpoch)
        self.users[permanent] = target
        return self.logged(self.user(permanent, record: target), .linkUser(self.id, anonymous: anonymous, permanent: permanent, at: now))
    }

    func user(_ id: UserID) throws(FanoutError) -> User {
        guard let record = self.users[id] else { throw .notFound("no such user", field: "user") }
        return self.user(id, record: record)
    }

    /// The slots of a user's devices (empty for an unknown user).
    func deviceSlots(of id: UserID) -> [UInt32] {
        self.users[id]?.devices ?? []
    }

    /// The anonymous users a clean-up at `now` removes: those created more than
    /// `anonymousUserLifetime` ago, counted for users older than the project's automatic clean-up
    /// from when it was turned on (Firebase Auth's rule). Sorted.
    func anonymousUsersDue(now: Timestamp) -> [UserID] {
        let lifetime = self.configuration.anonymousUserLifetime
        let enabledAt = self.anonymousCleanupEnabledAt ?? .min
        return self.users.filter { _, record in
            record.isAnonymous
                && Timestamp(millisecondsSinceEpoch: max(record.createdAt, enabledAt)).advanced(by: lifetime).millisecondsSinceEpoch <= now.millisecondsSinceEpoch
        }.keys.sorted()
    }

    /// Removes the anonymous users due at `now` (`anonymousUsersDue`). Their devices stay
    /// registered, unbound. Returns the removed users, sorted.
    mutating func cleanUpAnonymousUsers(now: Timestamp) -> Logged<[UserID]> {
        let due = self.anonymousUsersDue(now: now)
        self.removeUsers(due)
        return self.logged(due, when: !due.isEmpty, .removeAnonymousUsers(self.id, users: due))
    }

    /// Turns the project's automatic anonymous clean-up on (since `enabledAt`; kept when already
    /// on) or off (`nil`); returns since when it is on.
    mutating func setAnonymousCleanup(_ enabledAt: Timestamp?) -> Logged<Timestamp?> {
        let since = enabledAt.map { self.anonymousCleanupEnabledAt ?? $0.millisecondsSinceEpoch }
        self.anonymousCleanupEnabledAt = since
        let result = since.map(Timestamp.init(millisecondsSinceEpoch:))
        return self.logged(result, .setAnonymousCleanup(self.id, enabledAt: result))
    }

    /// Users in id order after `startAfter`, at most `limit`.
    func users(after startAfter: UserID?, limit: Int) -> [User] {
        self.users.keys.filter { startAfter == nil || $0 > startAfter! }.sorted().prefix(limit).map { self.user($0, record: self.users[$0]!) }
    }

    mutating func removeUsers(_ ids: [UserID]) {
        for id in ids {
            for slot in self.users[id]?.devices ?? [] {
                self.registry.setUser(nil, atSlot: slot)
            }
            self.users[id] = nil
        }
    }

    // MARK: - Helpers

    /// Removes `slot` from its user's devices, if it has a user. The user itself stays.
    mutating func unbind(_ slot: UInt32) {
        guard let user = self.registry.user(ofSlot: slot) else { return }
        self.users[user]?.devices.removeAll { $0 == slot }
        self.registry.setUser(nil, atSlot: slot)
    }

    mutating func touchUser(of slot: UInt32, now: Timestamp) {
        guard let user = self.registry.user(ofSlot: slot) else { return }
        if let lastActive = self.users[user]?.lastActive, lastActive < now.millisecondsSinceEpoch {
            self.users[user]!.lastActive = now.millisecondsSinceEpoch
        }
    }

    private func user(_ id: UserID, record: UserRecord) -> User {
        User(
            id: id,
            isAnonymous: record.isAnonymous,
            devices: record.devices.compactMap { self.registry.installation(atSlot: $0) },
            lastActive: Timestamp(millisecondsSinceEpoch: record.lastActive),
            createdAt: Timestamp(millisecondsSinceEpoch: record.createdAt)
        )
    }
}
