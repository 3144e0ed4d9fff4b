public import FanoutCore

/// A deliberately naive model of one project: dictionaries of strings, no slots, no bitmaps.
/// Property tests apply the same operations to it and to the engine and compare what they see.
///
/// Each operation returns the error code the engine must report (or nil for success) and applies
/// the change only on success, mirroring the engine's all-or-nothing rule.
public struct ReferenceModel {
    public struct Device: Equatable {
        public var token: String?
        public var platform: Platform
        public var lastSeen: Int64
        public var user: String?
        public var topics: Set<String>
        /// Holds the APNs token (the model's registrations all use the same one, so it is the
        /// last iOS installation registered with it: a token belongs to one installation).
        public var apns = false
    }

    public struct ModelUser: Equatable {
        public var anonymous: Bool
        public var devices: Set<String>
        public var lastActive: Int64
        public var createdAt: Int64
    }

    public var devices: [String: Device] = [:]  // by FID
    public var fidByToken: [String: String] = [:]
    public var users: [String: ModelUser] = [:]
    public var retiredTokens: Set<String> = []
    public var retiredFIDs: Set<String> = []

    public let maximumTopics: Int
    public let staleAfterMilliseconds: Int64
    public let expireAfterMilliseconds: Int64
    public let anonymousLifetimeMilliseconds: Int64

    public init(configuration: EngineConfiguration) {
        self.maximumTopics = configuration.maximumTopicsPerInstallation
        self.staleAfterMilliseconds = Self.milliseconds(configuration.staleAfter)
        self.expireAfterMilliseconds = Self.milliseconds(configuration.expireAfter)
        self.anonymousLifetimeMilliseconds = Self.milliseconds(configuration.anonymousUserLifetime)
    }

    private static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000
    }

    // MARK: - Addressing

    /// The FID a registration string addresses, or the error code for it. A string shaped like a
    /// FID is a FID first, then a token.
    public func resolve(_ registration: String) -> (fid: String?, error: FanoutError.Code?) {
        if FID(registration) != nil, self.devices[registration] != nil { return (registration, nil) }
        guard RegistrationToken(registration) != nil else { return (nil, .invalidArgument) }
        if let fid = self.fidByToken[registration] { return (fid, nil) }
        let retired = self.retiredTokens.contains(registration) || self.retiredFIDs.contains(registration)
        return (nil, retired ? .unregistered : .notFound)
    }

    // MARK: - Installations

    public enum RegisterExpectation: Equatable {
        case failure(FanoutError.Code)
        /// Success; `usesOffered` tells whether the engine must keep the offered FID.
        case success(usesOffered: Bool)
        /// A repeat of the registration of `fid`: answered with it, nothing changes.
        case existing(fid: String)
    }

    public func expectRegister(offeredFID: String?, token: String?, platform: Platform, apns: Bool) -> RegisterExpectation {
        let repeated = token.flatMap { self.fidByToken[$0] } ?? offeredFID.flatMap { self.devices[$0]?.token == nil ? $0 : nil }
        if let fid = repeated, let device = self.devices[fid], device.token == token, device.platform == platform,
            device.apns == apns, offeredFID.map({ FID($0) == nil || $0 == fid }) ?? true
        {
            return .existing(fid: fid)
        }
        if let token {
            if self.fidByToken[token] != nil { return .failure(.alreadyExists) }
            if self.retiredTokens.contains(token) { return .failure(.invalidArgument) }
        }
        if apns && platform != .ios { return .failure(.invalidArgument) }
        if let offeredFID, FID(offeredFID) != nil, self.devices[offeredFID] == nil, !self.retiredFIDs.contains(offeredFID) {
            return .success(usesOffered: true)
        }
        return .success(usesOffered: false)
    }

    /// Whether the engine may hand out `fid` to a new installation.
    public func isFresh(_ fid: String) -> Bool {
        FID(fid) != nil && self.devices[fid] == nil && !self.retiredFIDs.contains(fid)
    }

    public mutating func applyRegister(fid: String, token: String?, platform: Platform, apns: Bool = false, now: Int64) {
        if apns {
            for holder in self.devices.keys where self.devices[holder]!.apns { self.devices[holder]!.apns = false }
        }
        self.devices[fid] = Device(token: token, platform: platform, lastSeen: now, user: nil, topics: [], apns: apns)
        if let token { self.fidByToken[token] = fid }
    }

    public mutating func refresh(_ registration: String, to token: String, now: Int64) -> FanoutError.Code? {
        let (fid, error) = self.resolve(registration)
        guard let fid else { return error }
        if self.devices[fid]!.token != token {
            if self.fidByToken[token] != nil { return .alreadyExists }
            if self.retiredTokens.contains(token) { return .invalidArgument }
            self.retireToken(of: fid)
            self.devices[fid]!.token = token
            self.fidByToken[token] = fid
        }
        self.devices[fid]!.lastSeen = now
        self.touchUser(of: fid, now: now)
        return nil
    }

    public mutating func touch(_ registration: String, now: Int64) -> FanoutError.Code? {
        let (fid, error) = self.resolve(registration)
        guard let fid else { return error }
        self.devices[fid]!.lastSeen = max(self.devices[fid]!.lastSeen, now)
        self.touchUser(of: fid, now: now)
        return nil
    }

    public mutating func delete(_ fid: String) -> FanoutError.Code? {
        guard FID(fid) != nil else { return .invalidArgument }
        if self.devices[fid] == nil { return self.retiredFIDs.contains(fid) ? .unregistered : .notFound }
        self.deleteDevice(fid)
        return nil
    }

    private mutating func deleteDevice(_ fid: String) {
        self.unbind(fid)
        self.retireToken(of: fid)
        self.devices[fid] = nil
        self.retiredFIDs.insert(fid)
    }

    public func stale(now: Int64) -> Set<String> {
        Set(self.devices.filter { $0.value.lastSeen < now - self.staleAfterMilliseconds }.keys)
    }

    public mutating func pruneExpired(now: Int64) -> Set<String> {
        let expired = Set(self.devices.filter { $0.value.lastSeen < now - self.expireAfterMilliseconds }.keys)
        for fid in expired { self.deleteDevice(fid) }
        return expired
    }

    // MARK: - Topics

    public mutating func subscribe(_ registrations: [String], to topic: String) -> [BatchItemResult] {
        registrations.map { registration in
            let (fid, error) = self.resolve(registration)
            guard let fid else { return .failed(error!) }
            if self.devices[fid]!.topics.contains(topic) { return .ok }
            if self.devices[fid]!.topics.count >= self.maximumTopics { return .failed(.tooManyTopics) }
            self.devices[fid]!.topics.insert(topic)
            return .ok
        }
    }

    public mutating func unsubscribe(_ registrations: [String], from topic: String) -> [BatchItemResult] {
        registrations.map { registration in
            let (fid, error) = self.resolve(registration)
            guard let fid else { return .failed(error!) }
            self.devices[fid]!.topics.remove(topic)
            return .ok
        }
    }

    public func subscribers(of topic: String) -> Set<String> {
        Set(self.devices.filter { $0.value.topics.contains(topic) }.keys)
    }

    /// The FIDs a condition selects, evaluated device by device (no set algebra).
    public func audience(of condition: Condition) -> Set<String> {
        Set(self.devices.filter { _, device in condition.matches { device.topics.contains($0.value) } }.keys)
    }

    // MARK: - Users

    public mutating func bind(_ registration: String, to user: String, anonymous: Bool, now: Int64) -> FanoutError.Code? {
        let (fid, error) = self.resolve(registration)
        guard let fid else { return error }
        if let existing = self.users[user], existing.anonymous != anonymous { return .failedPrecondition }
        if self.devices[fid]!.user != user {
            self.unbind(fid)
            self.users[user, default: ModelUser(anonymous: anonymous, devices: [], lastActive: 0, createdAt: now)].devices.insert(fid)
            self.devices[fid]!.user = user
        }
        self.users[user]!.lastActive = max(self.users[user]!.lastActive, now)
        return nil
    }

    public mutating func signOut(_ user: String, on registration: String) -> FanoutError.Code? {
        let (fid, error) = self.resolve(registration)
        guard let fid else { return error }
        guard self.devices[fid]!.user == user else { return .failedPrecondition }
        self.unbind(fid)
        self.retireToken(of: fid)
        return nil
    }

    public mutating func link(anonymous: String, to permanent: String, now: Int64) -> FanoutError.Code? {
        if anonymous == permanent { return .invalidArgument }
        guard let source = self.users[anonymous] else { return .notFound }
        guard source.anonymous else { return .failedPrecondition }
        if let target = self.users[permanent], target.anonymous { return .failedPrecondition }
        self.users[anonymous] = nil
        var target = self.users[permanent] ?? ModelUser(anonymous: false, devices: [], lastActive: 0, createdAt: now)
        for fid in source.devices {
            target.devices.insert(fid)
            self.devices[fid]!.user = permanent
        }
        target.lastActive = max(target.lastActive, now)
        self.users[permanent] = target
        return nil
    }

    /// Anonymous users created at least the lifetime ago (automatic clean-up is never turned on here).
    public mutating func cleanUpAnonymousUsers(now: Int64) -> Set<String> {
        let idle = Set(self.users.filter { $0.value.anonymous && $0.value.createdAt + self.anonymousLifetimeMilliseconds <= now }.keys)
        for user in idle {
            for fid in self.users[user]!.devices { self.devices[fid]!.user = nil }
            self.users[user] = nil
        }
        return idle
    }

    // MARK: - Helpers

    private mutating func unbind(_ fid: String) {
        guard let user = self.devices[fid]?.user else { return }
        self.users[user]?.devices.remove(fid)
        self.devices[fid]!.user = nil
    }

    private mutating func retireToken(of fid: String) {
        guard let token = self.devices[fid]?.token else { return }
        self.fidByToken[token] = nil
        self.retiredTokens.insert(token)
        self.devices[fid]!.token = nil
    }

    private mutating func touchUser(of fid: String, now: Int64) {
        guard let user = self.devices[fid]?.user, let lastActive = self.users[user]?.lastActive else { return }
        if lastActive < now { self.users[user]!.lastActive = now }
    }
}
