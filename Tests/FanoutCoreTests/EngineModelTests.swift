@_spi(Storage) import FanoutCore
import FanoutTestSupport
import Testing

/// Random sequences of register / refresh / touch / delete / subscribe / unsubscribe / bind /
/// sign-out / link / clean-up / prune, applied to the engine and to `ReferenceModel`; after every
/// operation the results must agree, and every few steps the whole visible state must too:
/// lookups by FID and token, subscriber sets, topics per installation, condition audiences, users,
/// stale lists. Seeds are fixed; a seed that ever fails is added to `regressionSeeds`.
@Suite("Engine against the reference model")
struct EngineModelTests {
    static let seeds: [UInt64] = [1, 2, 3, 4, 5]
    static let operationsPerSeed = 2500
    /// Seeds that once found a bug; kept forever.
    static let regressionSeeds: [UInt64] = []

    @Test(arguments: Self.seeds + Self.regressionSeeds)
    func engineMatchesModel(seed: UInt64) async throws {
        var harness = try Harness(seed: seed)
        for step in 0..<Self.operationsPerSeed {
            try await harness.randomOperation(step: step)
            if step % 50 == 49 { try harness.compareEverything() }
        }
        try harness.compareEverything()
        // The run must have exercised the interesting paths, or it proves little.
        for kind in ["register", "subscribe", "tooManyTopics", "refresh", "delete", "signOut", "link", "prune", "cleanUp"] {
            #expect(harness.exercised[kind, default: 0] > 0, "seed \(seed) never exercised \(kind)")
        }
    }
}

struct Harness {
    var random: SeededRandomNumberGenerator
    let clock = ManualClock()
    private(set) var engine: Engine
    let configuration: EngineConfiguration
    /// The data directory, for a durable engine.
    let directory: String?
    var model: ReferenceModel
    let topics = ["t0", "t1", "t2", "t3", "t4", "t5", "t6"]
    let userNames = ["u0", "u1", "u2", "u3", "u4", "u5"]
    /// Every FID and token ever seen or offered, live or not, so lookups cover retired ones too.
    var knownFIDs: [String] = []
    var knownTokens: [String] = []
    var tokenCounter = 0
    var exercised: [String: Int] = [:]

    init(seed: UInt64, directory: String? = nil, durability: Durability = .none) throws {
        self.random = SeededRandomNumberGenerator(seed: seed)
        var configuration = EngineConfiguration()
        configuration.maximumTopicsPerInstallation = 4  // small, so TOO_MANY_TOPICS happens often
        configuration.maximumBatchSize = 12
        self.configuration = configuration
        self.directory = directory
        if let directory {
            self.engine = try Engine(directory: directory, durability: durability, configuration: configuration, clock: self.clock)
        } else {
            self.engine = Engine(configuration: configuration, clock: self.clock)
        }
        self.model = ReferenceModel(configuration: configuration)
    }

    /// Closes the durable engine and opens its directory again (recovery from the log).
    mutating func reopen(durability: Durability = .none) throws {
        guard let directory = self.directory else { return }
        try self.engine.close()
        self.engine = try Engine(directory: directory, durability: durability, configuration: self.configuration, clock: self.clock)
    }

    var now: Int64 { self.clock.now().millisecondsSinceEpoch }

    mutating func pick<T>(_ values: [T]) -> T? { values.randomElement(using: &self.random) }

    mutating func chance(_ percent: Int) -> Bool { Int.random(in: 0..<100, using: &self.random) < percent }

    mutating func freshToken() -> String {
        self.tokenCounter += 1
        // Realistic shape: 11-char prefix, colon, APA91b..., 163 bytes in all.
        let body = String(repeating: "x", count: 140)
        return "tok\(String(self.tokenCounter, radix: 36)):APA91b\(body)".padding(163)
    }

    /// A registration string: a live or retired FID or token, or garbage.
    mutating func someRegistration() -> String {
        switch Int.random(in: 0..<10, using: &self.random) {
        case 0..<4: return self.pick(self.knownFIDs) ?? "cAAAAAAAAAAAAAAAAAAAAA"
        case 4..<8: return self.pick(self.knownTokens) ?? "never-seen"
        case 8: return self.freshToken()
        default: return self.pick(["", "has space", "tab\t", "dGVmZ2hpamtsbW5vcHFyc3"])!
        }
    }

    mutating func someUser() -> String { self.pick(self.userNames)! }

    mutating func randomOperation(step: Int) async throws {
        if self.chance(15) {
            self.clock.advance(by: .seconds(Int64.random(in: 0...(4 * 86_400), using: &self.random)))
        }
        switch Int.random(in: 0..<100, using: &self.random) {
        case 0..<22: try await self.register()
        case 22..<45: try await self.subscribe(unsubscribe: false)
        case 45..<52: try await self.subscribe(unsubscribe: true)
        case 52..<60: try await self.refresh()
        case 60..<64: try await self.touch()
        case 64..<69: try await self.delete()
        case 69..<78: try await self.bind()
        case 78..<82: try await self.signOut()
        case 82..<87: try await self.link()
        case 87..<90: try await self.pruneAndCleanUp(jump: true)
        default: try self.checkCondition()
        }
    }

    // MARK: - Operations

    mutating func register() async throws {
        let offered: String?
        switch Int.random(in: 0..<5, using: &self.random) {
        case 0: offered = nil
        case 1: offered = "not-a-fid"
        case 2: offered = self.pick(self.knownFIDs)  // taken or retired
        default: offered = FID.make(fromRandomBytes: self.random.bytes(17)).string
        }
        let token: String? = self.chance(20) ? nil : (self.chance(15) ? self.pick(self.knownTokens) : self.freshToken())
        let platform = self.pick(Platform.allCases)!
        let apns = self.chance(10)
        let expected = self.model.expectRegister(offeredFID: offered, token: token, platform: platform, apns: apns)
        let request = RegistrationRequest(
            offeredFID: offered,
            token: token.flatMap(RegistrationToken.init),
            platform: platform,
            appID: AppID("1:1:\(platform):a")!,
            apnsToken: apns ? APNsDeviceToken(String(repeating: "ab", count: 32)) : nil
        )
        if let token { self.knownTokens.append(token) }
        do {
            let result = try await self.engine.register(request)
            let fid = result.installation.fid.string
            switch expected {
            case .failure(let code):
                Issue.record("register succeeded, model expected \(code)")
            case .existing(let existing):
                #expect(result.isExisting && fid == existing, "a repeated registration")
                return
            case .success(let usesOffered):
                #expect(!result.isExisting)
                #expect(result.fidWasAssigned == !usesOffered)
                if usesOffered {
                    #expect(fid == offered)
                } else {
                    #expect(self.model.isFresh(fid) && fid != offered)
                }
            }
            self.model.applyRegister(fid: fid, token: token, platform: platform, apns: apns, now: self.now)
            self.knownFIDs.append(fid)
            self.exercised["register", default: 0] += 1
        } catch {
            #expect(expected == .failure(error.code), "register: engine \(error.code)")
        }
    }

    mutating func subscribe(unsubscribe: Bool) async throws {
        let count = self.chance(3) ? 13 : Int.random(in: 1...12, using: &self.random)
        let registrations = (0..<count).map { _ in self.someRegistration() }
        let topic = self.pick(self.topics)!
        do {
            // As a server reads the strings (the model takes them as they came).
            let list = RegistrationList(registrations)
            let results =
                unsubscribe
                ? try await self.engine.unsubscribe(list, from: TopicName(topic)!)
                : try await self.engine.subscribe(list, to: TopicName(topic)!)
            #expect(count <= 12)
            let expected =
                unsubscribe
                ? self.model.unsubscribe(registrations, from: topic) : self.model.subscribe(registrations, to: topic)
            #expect(results == expected)
            if results.contains(.failed(.tooManyTopics)) { self.exercised["tooManyTopics", default: 0] += 1 }
            self.exercised["subscribe", default: 0] += 1
        } catch {
            #expect(count > 12 && error.code == .invalidArgument && error.field == "registrations")
        }
    }

    mutating func refresh() async throws {
        let registration = self.someRegistration()
        let newToken = self.chance(20) ? (self.pick(self.knownTokens) ?? "x") : self.freshToken()
        self.knownTokens.append(newToken)
        guard let address = RegistrationAddress(parsing: registration), let token = RegistrationToken(newToken) else { return }
        let expected = self.model.refresh(registration, to: newToken, now: self.now)
        do {
            _ = try await self.engine.refreshToken(address, to: token)
            #expect(expected == nil, "refresh succeeded, model expected \(String(describing: expected))")
            self.exercised["refresh", default: 0] += 1
        } catch {
            #expect(expected == error.code)
        }
    }

    mutating func touch() async throws {
        let registration = self.someRegistration()
        guard let address = RegistrationAddress(parsing: registration) else { return }
        let expected = self.model.touch(registration, now: self.now)
        do {
            try await self.engine.touch(address)
            #expect(expected == nil)
        } catch {
            #expect(expected == error.code)
        }
    }

    mutating func delete() async throws {
        guard let fidString = self.pick(self.knownFIDs), let fid = FID(fidString) else { return }
        let expected = self.model.delete(fidString)
        do {
            try await self.engine.deleteInstallation(fid)
            #expect(expected == nil)
            self.exercised["delete", default: 0] += 1
        } catch {
            #expect(expected == error.code)
        }
    }

    mutating func bind() async throws {
        let registration = self.someRegistration()
        let user = self.someUser()
        let anonymous = self.chance(50)
        guard let address = RegistrationAddress(parsing: registration) else { return }
        let expected = self.model.bind(registration, to: user, anonymous: anonymous, now: self.now)
        do {
            try await self.engine.bindDevice(address, to: UserID(user)!, anonymous: anonymous)
            #expect(expected == nil)
        } catch {
            #expect(expected == error.code)
        }
    }

    mutating func signOut() async throws {
        // Mostly a device of the user, so that sign-outs succeed often enough.
        let user = self.someUser()
        let devices = Array(self.model.users[user]?.devices ?? [])
        let registration = self.chance(70) ? (self.pick(devices) ?? self.someRegistration()) : self.someRegistration()
        guard let address = RegistrationAddress(parsing: registration) else { return }
        let expected = self.model.signOut(user, on: registration)
        do {
            try await self.engine.signOut(UserID(user)!, on: address)
            #expect(expected == nil)
            self.exercised["signOut", default: 0] += 1
        } catch {
            #expect(expected == error.code)
        }
    }

    mutating func link() async throws {
        let anonymous = self.someUser()
        let permanent = self.someUser()
        let expected = self.model.link(anonymous: anonymous, to: permanent, now: self.now)
        do {
            try await self.engine.linkUser(anonymous: UserID(anonymous)!, to: UserID(permanent)!)
            #expect(expected == nil)
            self.exercised["link", default: 0] += 1
        } catch {
            #expect(expected == error.code)
        }
    }

    mutating func pruneAndCleanUp(jump: Bool) async throws {
        if jump && self.chance(20) {
            self.clock.advance(by: .days(Int.random(in: 20...280, using: &self.random)))
        }
        let expectedStale = self.model.stale(now: self.now)
        #expect(Set(try self.engine.staleInstallations().map(\.fid.string)) == expectedStale)
        let expectedUsers = self.model.cleanUpAnonymousUsers(now: self.now)
        let cleaned = try await self.engine.cleanUpAnonymousUsers()
        #expect(Set(cleaned.map(\.value)) == expectedUsers)
        if !cleaned.isEmpty { self.exercised["cleanUp", default: 0] += 1 }
        let expectedExpired = self.model.pruneExpired(now: self.now)
        let expired = try await self.engine.pruneExpiredInstallations()
        #expect(Set(expired.map(\.fid.string)) == expectedExpired)
        if !expired.isEmpty { self.exercised["prune", default: 0] += 1 }
    }

    mutating func checkCondition() throws {
        let names = self.topics.map { TopicName($0)! }
        let condition = ConditionTests.randomCondition(
            atoms: Int.random(in: 1...5, using: &self.random),
            names: names,
            using: &self.random
        )
        #expect(try self.fids(of: self.engine.audience(of: condition)) == self.model.audience(of: condition))
    }

    // MARK: - Whole-state comparison

    func fids(of audience: Audience) throws -> Set<String> {
        let slots = audience.slotSet
        var result = Set<String>()
        for slot in slots {
            let installation = try #require(try self.engine.installation(atSlot: slot))
            result.insert(installation.fid.string)
        }
        #expect(result.count == slots.count)
        return result
    }

    func compareEverything() throws {
        #expect(try self.engine.installationCount() == self.model.devices.count)
        for fid in Set(self.knownFIDs) {
            let address = RegistrationAddress.fid(FID(fid)!)
            if let device = self.model.devices[fid] {
                let installation = try self.engine.installation(address)
                #expect(installation.token?.value == device.token)
                #expect(installation.platform == device.platform)
                #expect(installation.user?.value == device.user)
                #expect(installation.lastSeen.millisecondsSinceEpoch == device.lastSeen)
                #expect(Set(try self.engine.topics(of: address).map(\.value)) == device.topics)
            } else {
                #expect(throws: FanoutError(.unregistered, "", field: "registration")) { try self.engine.installation(address) }
            }
        }
        for token in Set(self.knownTokens) {
            guard let parsed = RegistrationToken(token) else { continue }
            let (fid, error) = self.model.resolve(token)
            if let fid {
                #expect(try self.engine.installation(.token(parsed)).fid.string == fid)
            } else {
                #expect(throws: FanoutError(error!, "", field: "registration")) { try self.engine.installation(.token(parsed)) }
            }
        }
        var listed: [String: Int] = [:]
        for entry in try self.engine.listTopics() { listed[entry.name.value] = entry.subscribers }
        for topic in self.topics {
            let expected = self.model.subscribers(of: topic)
            #expect(try self.fids(of: self.engine.audience(of: TopicName(topic)!)) == expected, "topic \(topic)")
            #expect(listed[topic] == (expected.isEmpty ? nil : expected.count))
        }
        for user in self.userNames {
            if let modelUser = self.model.users[user] {
                let engineUser = try self.engine.user(UserID(user)!)
                #expect(engineUser.isAnonymous == modelUser.anonymous)
                #expect(Set(engineUser.devices.map(\.fid.string)) == modelUser.devices)
                #expect(engineUser.lastActive.millisecondsSinceEpoch == modelUser.lastActive)
            } else {
                #expect(throws: FanoutError(.notFound, "", field: "user")) { try self.engine.user(UserID(user)!) }
            }
        }
    }
}

extension String {
    fileprivate func padding(_ length: Int) -> String {
        self.count >= length ? String(self.prefix(length)) : self + String(repeating: "0", count: length - self.count)
    }
}
