@_spi(Storage) import FanoutCore
import FanoutTestSupport
import Testing

/// The engine's operations one rule at a time, and the end-to-end use cases of design.md section 8.
@Suite("Engine")
struct EngineTests {
    let clock = ManualClock()
    let engine: Engine

    init() {
        self.engine = Engine(clock: self.clock)
    }

    private func register(
        _ token: String? = nil,
        fid: String? = nil,
        platform: Platform = .android,
        in project: ProjectID = .default
    ) async throws -> Installation {
        try await self.engine.register(
            RegistrationRequest(
                offeredFID: fid,
                token: token.flatMap(RegistrationToken.init),
                platform: platform,
                appID: AppID("1:1065473598624:\(platform):d7820756")!
            ),
            in: project
        ).installation
    }

    // MARK: - Registry

    @Test func registrationKeepsAValidFreeFIDAndAssignsOtherwise() async throws {
        let offered = "cAECAwQFBgcICQoLDA0ODx"
        let kept = try await self.engine.register(
            RegistrationRequest(offeredFID: offered, platform: .web, appID: AppID("app")!)
        )
        #expect(!kept.fidWasAssigned)
        #expect(kept.installation.fid.string == offered)

        for offer in [nil, "not-a-fid", offered] as [String?] {  // none, invalid, taken
            // (On another platform: the same request again would be a repeat, answered as existing.)
            let result = try await self.engine.register(RegistrationRequest(offeredFID: offer, platform: .android, appID: AppID("app")!))
            #expect(result.fidWasAssigned)
            #expect(result.installation.fid.string != offered)
        }
        #expect(try self.engine.installationCount() == 4)
    }

    @Test func lookupsByTokenAndFID() async throws {
        let installation = try await self.register("token-1", platform: .ios)
        #expect(try self.engine.installation(.token(RegistrationToken("token-1")!)).fid == installation.fid)
        #expect(try self.engine.installation(.fid(installation.fid)).token?.value == "token-1")
        #expect(try self.engine.installation(atSlot: installation.slot) == installation)
        #expect(throws: FanoutError(.notFound, "", field: "registration")) {
            try self.engine.installation(.token(RegistrationToken("unknown")!))
        }
    }

    @Test func aTokenBelongsToOneInstallationAndAFailedRegistrationChangesNothing() async throws {
        _ = try await self.register("shared")
        await #expect(throws: FanoutError(.alreadyExists, "", field: "token")) { try await self.register("shared", platform: .web) }
        await #expect(throws: FanoutError(.invalidArgument, "", field: "apnsToken")) {
            try await self.engine.register(
                RegistrationRequest(platform: .android, appID: AppID("app")!, apnsToken: APNsDeviceToken(String(repeating: "a", count: 64)))
            )
        }
        #expect(try self.engine.installationCount() == 1)
    }

    @Test func iOSInstallationsKeepTheirAPNsTokenAndDeviceDetails() async throws {
        let apns = APNsDeviceToken(String(repeating: "0f", count: 32))!
        let device = try DeviceDetails(name: "Ana's iPhone", os: "iOS 19.1", type: "phone")
        let installation = try await self.engine.register(
            RegistrationRequest(platform: .ios, appID: AppID("ios-app")!, device: device, apnsToken: apns)
        ).installation
        #expect(installation.apnsToken == apns)
        #expect(installation.device == device)
        #expect(installation.appID == AppID("ios-app"))
        #expect(installation.createdAt == self.clock.now())
    }

    @Test func tokenRotationRetiresTheOldTokenAndKeepsTopics() async throws {
        let installation = try await self.register("old-token")
        let topic = TopicName("weather")!
        #expect(try await self.engine.subscribe(["old-token"].addresses, to: topic) == [.ok])
        self.clock.advance(by: .seconds(60))
        let rotated = try await self.engine.refreshToken(.fid(installation.fid), to: RegistrationToken("new-token")!)
        #expect(rotated.slot == installation.slot)
        #expect(rotated.lastSeen == self.clock.now())
        #expect(throws: FanoutError(.unregistered, "", field: "registration")) {
            try self.engine.installation(.token(RegistrationToken("old-token")!))
        }
        #expect(try self.engine.topics(of: .token(RegistrationToken("new-token")!)) == [topic])
        #expect(try self.engine.audience(of: topic).slots == [installation.slot])
        // A retired token can never be registered again, by anyone.
        await #expect(throws: FanoutError(.invalidArgument, "", field: "token")) { try await self.register("old-token") }
        await #expect(throws: FanoutError(.invalidArgument, "", field: "token")) {
            try await self.engine.refreshToken(.fid(installation.fid), to: RegistrationToken("old-token")!)
        }
        // Setting the current token again is a no-op.
        #expect(try await self.engine.refreshToken(.fid(installation.fid), to: RegistrationToken("new-token")!).token?.value == "new-token")
    }

    @Test func slotReuseNeverConfusesTheOldHolder() async throws {
        let old = try await self.register("first-token", fid: "cAECAwQFBgcICQoLDA0ODx")
        _ = try await self.engine.subscribe([old.fid.string].addresses, to: TopicName("t")!)
        try await self.engine.deleteInstallation(old.fid)

        let new = try await self.register("second-token", fid: old.fid.string)
        #expect(new.slot == old.slot, "the slot is reused")
        #expect(new.generation == old.generation + 1)
        #expect(new.fid != old.fid, "a deleted installation's FID is never handed out again")
        #expect(throws: FanoutError(.unregistered, "", field: "registration")) { try self.engine.installation(.fid(old.fid)) }
        #expect(throws: FanoutError(.unregistered, "", field: "registration")) {
            try self.engine.installation(.token(RegistrationToken("first-token")!))
        }
        #expect(try self.engine.topics(of: .fid(new.fid)).isEmpty, "the new holder inherits no subscriptions")
        #expect(try self.engine.subscriberCount(of: TopicName("t")!) == 0)
        await #expect(throws: FanoutError(.unregistered, "", field: "fid")) { try await self.engine.deleteInstallation(old.fid) }
    }

    // MARK: - Topics

    @Test func batchSubscribeAnswersPerRegistrationInOrder() async throws {
        let a = try await self.register("token-a")
        let b = try await self.register(nil)
        let topic = TopicName("/topics/news")!
        // As a server reads a request's strings: each a FID or a token, INVALID_ARGUMENT for neither.
        let results = try await self.engine.subscribe(
            ["token-a", b.fid.string, "unknown-token", "not a token", "dGVmZ2hpamtsbW5vcHFyc3", "token-a"] as RegistrationList,
            to: topic
        )
        #expect(results == [.ok, .ok, .failed(.notFound), .failed(.invalidArgument), .failed(.notFound), .ok])
        #expect(try self.engine.subscriberCount(of: topic) == 2)
        #expect(try self.engine.audience(of: topic).slots == [a.slot, b.slot].sorted())
        #expect(try self.engine.listTopics().map(\.name) == [topic])

        #expect(try await self.engine.unsubscribe(["token-a", "token-a", ""] as RegistrationList, from: topic) == [.ok, .ok, .failed(.invalidArgument)])
        #expect(try self.engine.subscriberCount(of: topic) == 1)
        #expect(try await self.engine.unsubscribe([b.fid.string].addresses, from: topic) == [.ok])
        #expect(try self.engine.listTopics().isEmpty, "a topic with no subscribers is gone")
    }

    @Test func batchesAboveTheLimitAreRefusedWhole() async throws {
        _ = try await self.register("t0")
        let tooMany = ["t0"] + (1...1000).map { "t\($0)" }
        await #expect(throws: FanoutError(.invalidArgument, "", field: "registrations")) {
            try await self.engine.subscribe(tooMany.addresses, to: TopicName("x")!)
        }
        #expect(try self.engine.subscriberCount(of: TopicName("x")!) == 0)
        #expect(try await self.engine.subscribe(Array(tooMany.prefix(1000)).addresses, to: TopicName("x")!).count == 1000)
    }

    @Test func anInstallationHasAtMost2000Topics() async throws {
        let installation = try await self.register("busy")
        for index in 0..<2000 {
            #expect(try await self.engine.subscribe(["busy"].addresses, to: TopicName("topic-\(index)")!) == [.ok])
        }
        #expect(try await self.engine.subscribe(["busy"].addresses, to: TopicName("topic-2000")!) == [.failed(.tooManyTopics)])
        #expect(try await self.engine.subscribe(["busy"].addresses, to: TopicName("topic-7")!) == [.ok], "re-subscribing is fine at the limit")
        #expect(try self.engine.topics(of: .fid(installation.fid)).count == 2000)
        _ = try await self.engine.unsubscribe(["busy"].addresses, from: TopicName("topic-0")!)
        #expect(try await self.engine.subscribe(["busy"].addresses, to: TopicName("topic-2000")!) == [.ok])
    }

    @Test func conditionAudiencesUseSetAlgebraWithNotOverTheWholeProject() async throws {
        let a = try await self.register("a")
        let ab = try await self.register("ab")
        let c = try await self.register("c")
        let none = try await self.register("none")
        _ = try await self.engine.subscribe(["a", "ab"].addresses, to: TopicName("A")!)
        _ = try await self.engine.subscribe(["ab"].addresses, to: TopicName("B")!)
        _ = try await self.engine.subscribe(["c"].addresses, to: TopicName("C")!)
        func audience(_ expression: String) throws -> Set<UInt32> {
            Set(try self.engine.audience(of: Condition(parsing: expression)).slots)
        }
        #expect(try audience("'A' in topics && ('B' in topics || 'C' in topics)") == [ab.slot])
        #expect(try audience("!('A' in topics)") == [c.slot, none.slot])
        #expect(try audience("'A' in topics && !('B' in topics)") == [a.slot])
        #expect(try audience("'C' in topics || 'A' in topics && 'B' in topics") == [ab.slot])  // left to right
        #expect(try audience("'nobody' in topics").isEmpty)
    }

    // MARK: - Projects

    @Test func projectsAreIsolated() async throws {
        let other = ProjectID("other-project")!
        try await self.engine.createProject(other)
        await #expect(throws: FanoutError(.alreadyExists, "", field: "project")) { try await self.engine.createProject(other) }
        _ = try await self.register("same-token")
        _ = try await self.register("same-token", in: other)
        _ = try await self.engine.subscribe(["same-token"].addresses, to: TopicName("news")!, in: other)
        #expect(try self.engine.subscriberCount(of: TopicName("news")!) == 0)
        #expect(try self.engine.subscriberCount(of: TopicName("news")!, in: other) == 1)
        #expect(self.engine.projectIDs() == [.default, other])

        try await self.engine.deleteProject(other)
        #expect(throws: FanoutError(.notFound, "", field: "project")) { try self.engine.installationCount(in: other) }
        await #expect(throws: FanoutError(.failedPrecondition, "", field: "project")) { try await self.engine.deleteProject(.default) }
    }

    // MARK: - Users (design.md use cases 2 and 3)

    @Test func aUsersDevicesAndSignOut() async throws {
        let ana = UserID("ana")!
        let iphone = try await self.register("iphone", platform: .ios)
        let pixel = try await self.register("pixel", platform: .android)
        let browser = try await self.register("browser", platform: .web)
        for device in [iphone, pixel, browser] {
            try await self.engine.bindDevice(.fid(device.fid), to: ana)
        }
        #expect(Set(try self.engine.audience(of: ana).slots) == [iphone.slot, pixel.slot, browser.slot])

        // Someone else cannot sign ana out.
        await #expect(throws: FanoutError(.failedPrecondition, "", field: "registration")) {
            try await self.engine.signOut(UserID("mallory")!, on: .fid(iphone.fid))
        }
        let signedOut = try await self.engine.signOut(ana, on: .fid(iphone.fid))
        #expect(signedOut.token == nil && signedOut.user == nil)
        #expect(throws: FanoutError(.unregistered, "", field: "registration")) {
            try self.engine.installation(.token(RegistrationToken("iphone")!))
        }
        #expect(Set(try self.engine.audience(of: ana).slots) == [pixel.slot, browser.slot])
        #expect(Set(try self.engine.user(ana).devices.map(\.fid)) == [pixel.fid, browser.fid])
    }

    @Test func anonymousFirstAccountLater() async throws {
        let device = try await self.register("device")
        _ = try await self.engine.subscribe(["device"].addresses, to: TopicName("deals")!)
        let anonymous = UserID("anon-1")!
        let permanent = UserID("ana")!
        try await self.engine.bindDevice(.fid(device.fid), to: anonymous, anonymous: true)
        await #expect(throws: FanoutError(.failedPrecondition, "", field: "user")) {
            try await self.engine.bindDevice(.fid(device.fid), to: anonymous, anonymous: false)
        }
        let linked = try await self.engine.linkUser(anonymous: anonymous, to: permanent)
        #expect(!linked.isAnonymous)
        #expect(linked.devices.map(\.fid) == [device.fid])
        #expect(throws: FanoutError(.notFound, "", field: "user")) { try self.engine.user(anonymous) }
        #expect(try self.engine.installation(.fid(device.fid)).user == permanent)
        #expect(try self.engine.topics(of: .fid(device.fid)) == [TopicName("deals")!], "nothing is lost")
        await #expect(throws: FanoutError(.failedPrecondition, "", field: "anonymousUser")) {
            try await self.engine.linkUser(anonymous: permanent, to: UserID("someone")!)
        }
    }

    /// Firebase Auth's rule: an anonymous user goes 30 days after it was created, whatever its
    /// activity since; a dry run lists who would go.
    @Test func anonymousUsersAreCleanedUp30DaysAfterTheirCreation() async throws {
        let first = try await self.register("first")
        let later = try await self.register("later")
        try await self.engine.bindDevice(.fid(first.fid), to: UserID("anon-first")!, anonymous: true)
        try await self.engine.bindDevice(.fid(later.fid), to: UserID("permanent")!)
        self.clock.advance(by: .days(20))
        try await self.engine.touch(.fid(first.fid))  // activity does not postpone it
        self.clock.advance(by: .days(9))  // day 29
        #expect(try self.engine.anonymousUsersDueForCleanUp().isEmpty)
        #expect(try await self.engine.cleanUpAnonymousUsers().isEmpty)
        self.clock.advance(by: .days(2))  // day 31
        #expect(try self.engine.anonymousUsersDueForCleanUp() == [UserID("anon-first")!])
        #expect(try self.engine.user(UserID("anon-first")!).devices.count == 1, "a dry run changes nothing")
        #expect(try await self.engine.cleanUpAnonymousUsers() == [UserID("anon-first")!])
        #expect(try self.engine.installation(.fid(first.fid)).user == nil, "the device stays, unbound")
        #expect(try self.engine.user(UserID("permanent")!).devices.count == 1, "permanent users stay")
    }

    /// Users created before automatic clean-up was turned on count from when it was.
    @Test func usersOlderThanTheSettingCountFromWhenItWasTurnedOn() async throws {
        let old = try await self.register("old")
        let young = try await self.register("young")
        try await self.engine.bindDevice(.fid(old.fid), to: UserID("anon-old")!, anonymous: true)  // day 0
        self.clock.advance(by: .days(5))
        let since = try await self.engine.setAnonymousCleanUp(true)
        #expect(since == self.clock.now())
        #expect(try await self.engine.setAnonymousCleanUp(true) == since, "turning it on again keeps the first time")
        self.clock.advance(by: .days(1))
        try await self.engine.bindDevice(.fid(young.fid), to: UserID("anon-young")!, anonymous: true)  // day 6
        self.clock.advance(by: .days(28))  // day 34: 29 days since it was turned on
        #expect(try self.engine.anonymousUsersDueForCleanUp().isEmpty)
        self.clock.advance(by: .days(1))  // day 35
        #expect(try self.engine.anonymousUsersDueForCleanUp() == [UserID("anon-old")!])
        self.clock.advance(by: .days(1))  // day 36
        #expect(try self.engine.anonymousUsersDueForCleanUp() == [UserID("anon-old")!, UserID("anon-young")!])
        #expect(try await self.engine.setAnonymousCleanUp(false) == nil)
        #expect(try self.engine.anonymousCleanUpEnabledAt() == nil)
        #expect(try self.engine.anonymousUsersDueForCleanUp() == [UserID("anon-old")!, UserID("anon-young")!], "counted from creation when off")
        #expect(try self.engine.users().map(\.id) == [UserID("anon-old")!, UserID("anon-young")!])
        #expect(try self.engine.users(after: UserID("anon-old")!, limit: 5).map(\.createdAt) == [Timestamp(millisecondsSinceEpoch: ManualClock().now().millisecondsSinceEpoch + 6 * 86_400_000)])
    }

    // MARK: - Staleness and expiry (design.md use case 4)

    @Test func staleAfter30DaysExpiredAfter270() async throws {
        let quiet = try await self.register("quiet")
        let busy = try await self.register("busy")
        _ = try await self.engine.subscribe(["quiet", "busy"].addresses, to: TopicName("t")!)
        try await self.engine.bindDevice(.fid(quiet.fid), to: UserID("u")!)
        self.clock.advance(by: .days(29))
        try await self.engine.touch(.token(RegistrationToken("busy")!))
        #expect(try self.engine.staleInstallations().isEmpty)
        self.clock.advance(by: .days(2))
        #expect(try self.engine.staleInstallations().map(\.fid) == [quiet.fid])
        #expect(try await self.engine.pruneExpiredInstallations().isEmpty)

        self.clock.advance(by: .days(240))
        try await self.engine.touch(.fid(busy.fid))
        #expect(try await self.engine.pruneExpiredInstallations().map(\.fid) == [quiet.fid])
        #expect(throws: FanoutError(.unregistered, "", field: "registration")) { try self.engine.installation(.fid(quiet.fid)) }
        #expect(try self.engine.audience(of: TopicName("t")!).slots == [busy.slot])
        #expect(try self.engine.user(UserID("u")!).devices.isEmpty)
        #expect(try self.engine.installationCount() == 1)
    }

    @Test func installationLifecycle() async throws {
        // A FID first (FID mode), then a token, a rotation, then deletion.
        let installation = try await self.register(nil, platform: .android)
        #expect(installation.token == nil)
        _ = try await self.engine.refreshToken(.fid(installation.fid), to: RegistrationToken("t1")!)
        _ = try await self.engine.subscribe(["t1"].addresses, to: TopicName("PUSH_RC")!)
        _ = try await self.engine.refreshToken(.fid(installation.fid), to: RegistrationToken("t2")!)
        #expect(try self.engine.topics(of: .token(RegistrationToken("t2")!)) == [TopicName("PUSH_RC")!])
        let deleted = try await self.engine.deleteInstallation(installation.fid)
        #expect(deleted.token?.value == "t2")
        #expect(try self.engine.subscriberCount(of: TopicName("PUSH_RC")!) == 0)
        let again = try await self.register("t3", fid: installation.fid.string)
        #expect(again.fid != installation.fid)
    }
}
