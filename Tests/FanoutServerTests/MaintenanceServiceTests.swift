import FanoutCore
@testable import FanoutServer
import FanoutTestSupport
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
}
