import ArgumentParser
import FanoutCore

struct DemoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Walk through the engine's model in memory: installations, a user's devices, topics, conditions."
    )

    func run() throws {
        let engine = Engine()
        let appID = AppID("1:1234567890:ios:0a1b2c3d4e5f")!

        print("== A user with three devices")
        let phone = try engine.register(
            RegistrationRequest(
                token: RegistrationToken("demo-ios-token-1")!,
                platform: .ios,
                appID: appID,
                device: try DeviceDetails(name: "Ana's iPhone", os: "iOS 19.1", type: "phone")
            )
        ).installation
        let android = try engine.register(
            RegistrationRequest(
                offeredFID: try FID.generate().string,
                token: RegistrationToken("demo-android-token-1")!,
                platform: .android,
                appID: AppID("1:1234567890:android:0a1b2c3d4e5f")!,
                device: try DeviceDetails(name: "Pixel", os: "Android 16", type: "phone")
            )
        ).installation
        let browser = try engine.register(
            RegistrationRequest(
                platform: .web,
                appID: AppID("1:1234567890:web:0a1b2c3d4e5f")!,
                device: try DeviceDetails(name: "Firefox", os: "Linux", type: "browser")
            )
        ).installation
        let ana = UserID("ana")!
        for device in [phone, android, browser] {
            try engine.bindDevice(.fid(device.fid), to: ana)
            print("registered \(device.platform) \(device.fid) (\(device.device.name ?? "")) -> user ana")
        }

        print("\n== Topics and a condition")
        let news = TopicName("news")!
        let sport = TopicName("sport")!
        print("subscribe all three to news:", try engine.subscribe([phone.fid.string, android.fid.string, browser.fid.string], to: news))
        print("subscribe the phone to sport:", try engine.subscribe(["demo-ios-token-1"], to: sport))
        let condition = try Condition(parsing: "'news' in topics && !('sport' in topics)")
        let audience = try engine.audience(of: condition)
        print("\(condition) reaches \(audience.count) installations")

        print("\n== Token rotation keeps the topics")
        _ = try engine.refreshToken(.fid(phone.fid), to: RegistrationToken("demo-ios-token-2")!)
        do {
            _ = try engine.installation(.token(RegistrationToken("demo-ios-token-1")!))
        } catch {
            print("old token: \(error.code.name)")
        }
        print("phone topics:", try engine.topics(of: .fid(phone.fid)).map(\.value))

        print("\n== Sign-out on the phone")
        try engine.signOut(ana, on: .fid(phone.fid))
        print("ana's devices:", try engine.user(ana).devices.map { $0.device.name ?? "" }.joined(separator: ", "))

        print("\n== Anonymous first, account later")
        let anonymous = UserID("anon-7f3a")!
        try engine.bindDevice(.fid(phone.fid), to: anonymous, anonymous: true)
        try engine.linkUser(anonymous: anonymous, to: ana)
        print("after linking, ana's devices:", try engine.user(ana).devices.map { $0.device.name ?? "" }.joined(separator: ", "))

        print("\n== Deleting an installation")
        try engine.deleteInstallation(browser.fid)
        print("news subscribers:", try engine.subscriberCount(of: news))
        print("\nThis demo ran in memory; durable data directories come with the write-ahead log.")
    }
}
