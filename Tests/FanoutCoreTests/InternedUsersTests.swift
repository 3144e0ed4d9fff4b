@testable import FanoutCore
import FanoutModel
import FanoutTestSupport
import Testing

@Suite("Interned users")
struct InternedUsersTests {
    /// Binding, rebinding, unbinding and deleting installations at random, against a dictionary:
    /// every installation reads back its user, and the registry keeps exactly the users some
    /// installation is bound to (numbers of forgotten users are reused for new ones).
    @Test(arguments: [7, 8] as [UInt64])
    func registryUsersMatchTheModel(seed: UInt64) throws {
        var random = SeededRandomNumberGenerator(seed: seed)
        var registry = InstallationRegistry()
        var model: [UInt32: UserID?] = [:]
        let app = AppID("1:1234567890:android:0a1b2c3d")!
        let now = Timestamp(millisecondsSinceEpoch: 1_767_225_600_000)
        for step in 0..<4000 {
            let roll = Int.random(in: 0..<100, using: &random)
            if roll < 30 || model.isEmpty {
                let slot = try registry.register(RegistrationRequest(platform: .android, appID: app), now: now).installation.slot
                model[slot] = .some(nil)
            } else if roll < 85 {
                let slot = model.keys.randomElement(using: &random)!
                let user = Int.random(in: 0..<5, using: &random) == 0 ? nil : UserID("user-\(Int.random(in: 0..<40, using: &random))")!
                registry.setUser(user, atSlot: slot)
                model[slot] = .some(user)
            } else {
                let slot = model.keys.randomElement(using: &random)!
                registry.delete(slot: slot)
                model[slot] = nil
            }
            if step % 200 == 0 || step == 3999 {
                for (slot, user) in model {
                    #expect(registry.user(ofSlot: slot) == user)
                    #expect(registry.installation(atSlot: slot)?.user == user)
                }
                #expect(registry.boundUserCount == Set(model.values.compactMap { $0 }).count)
            }
        }
    }
}

@Suite("Registry limits")
struct RegistryLimitTests {
    /// App ids are kept in 16 bits: the 65,537th distinct one is refused before anything changes,
    /// and an app id already known still registers.
    @Test
    func theAppIDPastTheMostIsRefused() throws {
        var registry = InstallationRegistry()
        let now = Timestamp(millisecondsSinceEpoch: 1_767_225_600_000)
        for number in 0..<InstallationRegistry.maximumAppCount {
            _ = try registry.register(RegistrationRequest(platform: .android, appID: AppID("1:1:android:\(number)")!), now: now)
        }
        let refused = AppID("1:1:android:one-more")!
        let token = RegistrationToken("a-token-for-the-app-one-too-many")!
        #expect(throws: FanoutError(.resourceExhausted, "the project has 65536 apps, the most it can have", field: "appId")) {
            try registry.register(RegistrationRequest(token: token, platform: .android, appID: refused), now: now)
        }
        #expect(registry.count == InstallationRegistry.maximumAppCount)
        #expect(registry.slot(forToken: token) == nil)
        _ = try registry.register(RegistrationRequest(token: token, platform: .android, appID: AppID("1:1:android:7")!), now: now)
        #expect(registry.slot(forToken: token) != nil)
    }

    /// A project's first few app ids are found by comparing their bytes, the rest through a
    /// table: either way each installation keeps the app id it was registered with, an id that
    /// is a prefix of another included.
    @Test
    func eachInstallationKeepsItsAppIDWhateverHowManyTheProjectHas() throws {
        var registry = InstallationRegistry()
        let now = Timestamp(millisecondsSinceEpoch: 1_767_225_600_000)
        // Twenty ids, the first interned ones each a prefix of a neighbour ("...:10", "...:1", "...:11").
        let appIDs = [10, 1, 11, 0, 12, 2, 13, 3, 14, 4, 15, 5, 16, 6, 17, 7, 18, 8, 19, 9].map { AppID("1:1:android:\($0)")! }
        var random = SeededRandomNumberGenerator(seed: 7)
        var registered: [(slot: UInt32, appID: AppID)] = []
        for appID in appIDs + (0..<300).map({ _ in appIDs[Int(random.next() % 20)] }) {
            let installation = try registry.register(RegistrationRequest(platform: .android, appID: appID), now: now).installation
            registered.append((installation.slot, appID))
        }
        for (slot, appID) in registered {
            #expect(registry.installation(atSlot: slot)?.appID == appID)
        }
    }
}
