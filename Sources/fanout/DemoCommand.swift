import ArgumentParser
import FanoutCore

struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Walk through the engine's model: installations, a user's devices, topics, conditions.",
        discussion: """
            With --data-dir the engine is durable: each run adds a project (demo-1, demo-2, ...) to the \
            directory, and the next run recovers them all from the write-ahead log.
            """
    )

    @Option(help: "A data directory to run the demo against (created if needed); in memory when omitted.")
    var dataDir: String?

    func run() async throws {
        let engine = try self.dataDir.map { try Engine(directory: $0) } ?? Engine()
        defer { try? engine.close() }
        var project = ProjectID.default
        if let directory = self.dataDir, let recovery = engine.recovery {
            let existing = engine.projectIDs()
            print("== Opened \(directory): \(recovery.records) log records replayed in \(recovery.duration)")
            print("projects already there: \(existing.map(\.value).joined(separator: ", "))")
            project = ProjectID("demo-\(existing.count)")!
            try await engine.createProject(project)
            print("this run uses project \(project)\n")
        }
        try await Self.walkThrough(engine, in: project)
        print(self.dataDir.map { "\nEverything above is in the write-ahead log of \($0)." } ?? "\n(in memory: pass --data-dir DIR to keep it)")
    }

    private static func walkThrough(_ engine: Engine, in project: ProjectID) async throws {
        print("== A user with three devices")
        let phone = try await engine.register(
            RegistrationRequest(
                token: RegistrationToken("demo-ios-token-1")!,
                platform: .ios,
                appID: AppID("1:1234567890:ios:0a1b2c3d4e5f")!,
                device: try DeviceDetails(name: "Ana's iPhone", os: "iOS 19.1", type: "phone")
            ),
            in: project
        ).installation
        let android = try await engine.register(
            RegistrationRequest(
                offeredFID: try FID.generate().string,
                token: RegistrationToken("demo-android-token-1")!,
                platform: .android,
                appID: AppID("1:1234567890:android:0a1b2c3d4e5f")!,
                device: try DeviceDetails(name: "Pixel", os: "Android 16", type: "phone")
            ),
            in: project
        ).installation
        let browser = try await engine.register(
            RegistrationRequest(
                platform: .web,
                appID: AppID("1:1234567890:web:0a1b2c3d4e5f")!,
                device: try DeviceDetails(name: "Firefox", os: "Linux", type: "browser")
            ),
            in: project
        ).installation
        let ana = UserID("ana")!
        for device in [phone, android, browser] {
            try await engine.bindDevice(.fid(device.fid), to: ana, in: project)
            print("registered \(device.platform) \(device.fid) (\(device.device.name ?? "")) -> user ana")
        }

        print("\n== Topics and a condition")
        let news = TopicName("news")!
        let sport = TopicName("sport")!
        let everyone: [RegistrationAddress] = [.fid(phone.fid), .fid(android.fid), .fid(browser.fid)]
        print("subscribe all three to news:", try await engine.subscribe(everyone, to: news, in: project))
        print("subscribe the phone to sport:", try await engine.subscribe([.token(RegistrationToken("demo-ios-token-1")!)], to: sport, in: project))
        let condition = try Condition(parsing: "'news' in topics && !('sport' in topics)")
        let audience = try engine.audience(of: condition, in: project)
        print("\(condition) reaches \(audience.count) installations")

        print("\n== Token rotation keeps the topics")
        _ = try await engine.refreshToken(.fid(phone.fid), to: RegistrationToken("demo-ios-token-2")!, in: project)
        do {
            _ = try engine.installation(.token(RegistrationToken("demo-ios-token-1")!), in: project)
        } catch {
            print("old token: \(error.code.name)")
        }
        print("phone topics:", try engine.topics(of: .fid(phone.fid), in: project).map(\.value))

        print("\n== Sign-out on the phone")
        try await engine.signOut(ana, on: .fid(phone.fid), in: project)
        print("ana's devices:", try engine.user(ana, in: project).devices.map { $0.device.name ?? "" }.joined(separator: ", "))

        print("\n== Anonymous first, account later")
        let anonymous = UserID("anon-7f3a")!
        try await engine.bindDevice(.fid(phone.fid), to: anonymous, anonymous: true, in: project)
        try await engine.linkUser(anonymous: anonymous, to: ana, in: project)
        print("after linking, ana's devices:", try engine.user(ana, in: project).devices.map { $0.device.name ?? "" }.joined(separator: ", "))

        print("\n== Sends, mailboxes and a delivery worker")
        let sent = try await engine.send(
            Array(#"{"message":{"condition":"'news' in topics && !('sport' in topics)","notification":{"title":"Kick-off"}}}"#.utf8),
            in: project
        )
        print("\(sent.messageID) reached \(sent.audience) installations")
        let toAna = try await engine.send(Array(#"{"message":{"user":"ana","data":{"score":"2-1"}}}"#.utf8), in: project)
        print("\(toAna.messageID) reached ana's \(toAna.audience) devices")
        let multicast = try await engine.send(
            Array(#"{"message":{"tokens":["demo-android-token-1","demo-ios-token-1"],"data":{"score":"2-1"}}}"#.utf8),
            in: project
        )
        print("\(multicast.messageID) per recipient: \(multicast.recipients)")
        for delivery in try engine.pendingDeliveries(for: .fid(phone.fid), in: project) {
            print("phone mailbox: \(delivery.messageID ?? "deleted messages"), \(delivery.payload.count)-byte APNs body")
        }
        let worker = try engine.attachConsumer(.platform(.ios), credit: 10, in: project)
        let taken = worker.poll()
        print("an iOS worker took \(taken.count) and acknowledged \(try await worker.acknowledge(taken.map(\.id)))")
        worker.detach()
        print("phone mailbox now holds \(try engine.pendingDeliveries(for: .fid(phone.fid), in: project).count)")

        print("\n== Deleting an installation")
        try await engine.deleteInstallation(browser.fid, in: project)
        print("news subscribers:", try engine.subscriberCount(of: news, in: project))
        let statistics = try engine.deliveryStatistics(in: project)
        print("deliveries: \(statistics.enqueued) enqueued, \(statistics.acknowledged) acknowledged, \(statistics.dropped) dropped with the browser, \(statistics.pending) pending")
    }
}
