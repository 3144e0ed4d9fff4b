import FanoutCore
@testable import FanoutServer
import FanoutTestSupport
import Logging
import Synchronization
import Testing

/// The server's periodic work: anonymous users go by themselves only in projects that turned
/// automatic clean-up on, 30 days after their creation.
@Suite("Maintenance service")
struct MaintenanceServiceTests {
    @Test func automaticCleanUpRunsOnlyWhereItIsOn() async throws {
        let clock = ManualClock()
        let engine = Engine(clock: clock)
        let on = ProjectID("with-cleanup")!
        let off = ProjectID("without-cleanup")!
        for project in [on, off] {
            try await engine.createProject(project)
            let device = try await engine.register(
                RegistrationRequest(token: RegistrationToken("t-\(project)"), platform: .android, appID: AppID("app")!), in: project
            ).installation
            try await engine.bindDevice(.fid(device.fid), to: UserID("guest")!, anonymous: true, in: project)
        }
        try await engine.setAnonymousCleanUp(true, in: on)
        let service = MaintenanceService(engine: engine)

        clock.advance(by: .days(29))
        await service.cleanUpAnonymousUsers()
        #expect(try engine.users(in: on).map(\.id) == [UserID("guest")!], "day 29: not yet")

        clock.advance(by: .days(2))
        await service.cleanUpAnonymousUsers()
        #expect(try engine.users(in: on).isEmpty, "day 31: gone where clean-up is on")
        #expect(try engine.users(in: off).map(\.id) == [UserID("guest")!], "kept where it is off")
        #expect(try engine.anonymousUsersDueForCleanUp(in: off) == [UserID("guest")!], "though due")
    }

    /// A sweep of an engine closed meanwhile (a cluster node's shard it just stopped owning) is
    /// refused UNAVAILABLE and changes nothing: logged at debug level, not once a second as a
    /// warning. A sweep that fails otherwise is still a warning.
    @Test func aSweepOfAClosedEngineIsNoWarning() async throws {
        try await TemporaryDirectory.with { directory in
            let records = RecordingLogHandler.Records()
            let logger = Logger(label: "test") { _ in RecordingLogHandler(records: records) }
            let engine = try Engine(directory: directory)
            try await engine.createProject(ProjectID("shop-app")!)
            let service = MaintenanceService(engine: engine, logger: logger)
            await service.expireDeliveries()
            #expect(records.entries.withLock { $0.isEmpty }, "an open engine's sweep logs nothing")
            try engine.close()
            await service.expireDeliveries()
            await service.pruneInstallations()
            await service.cleanUpAnonymousUsers()
            let entries = records.entries.withLock { $0 }
            #expect(entries.contains { $0.level == .debug && $0.text.contains("expiring deliveries failed") && $0.text.contains("closing") }, "\(entries)")
            #expect(!entries.contains { $0.level >= .warning }, "\(entries)")
        }
    }
}
