import FanoutCore
import FanoutTestSupport
import Foundation
import Testing

/// Retries and addresses: repeating a registration is answered with the existing installation
/// (a client whose reply was lost can tell "done" from "refused"), a token shaped like a FID stays
/// addressable, and a rotated or deleted registration is UNREGISTERED everywhere.
@Suite("Registration retries and addresses")
struct RegistrationRetryTests {
    static func request(token: String?, fid: String? = nil, platform: Platform = .ios, name: String? = nil) throws -> RegistrationRequest {
        RegistrationRequest(
            offeredFID: fid,
            token: token.flatMap(RegistrationToken.init),
            platform: platform,
            appID: AppID("1:1:ios:a")!,
            device: try DeviceDetails(name: name)
        )
    }

    @Test func anIdenticalRegisterAnswersTheExistingInstallation() async throws {
        try await TemporaryDirectory.with { directory in
            let engine = try Engine(directory: directory, durability: .always)
            let first = try await engine.register(try Self.request(token: "retry-token", name: "phone"))
            #expect(!first.isExisting)
            let records = engine.logStatistics?.records
            let again = try await engine.register(try Self.request(token: "retry-token", name: "phone"))
            #expect(again.isExisting)
            #expect(again.installation == first.installation)
            #expect(engine.logStatistics?.records == records, "a repeat logs nothing")
            // The same with the FID the first reply gave, offered.
            let offered = try await engine.register(try Self.request(token: "retry-token", fid: first.installation.fid.description, name: "phone"))
            #expect(offered.isExisting && !offered.fidWasAssigned)
            #expect(try engine.installationCount() == 1)

            // Anything different is another registration of a taken token: refused.
            for different in [
                try Self.request(token: "retry-token", name: "tablet"),
                try Self.request(token: "retry-token", platform: .android, name: "phone"),
                try Self.request(token: "retry-token", fid: try FID.generate().description, name: "phone"),
            ] {
                await #expect(throws: FanoutError(.alreadyExists, "", field: "token")) { try await engine.register(different) }
            }

            // Without a token: the offered FID identifies the repeat.
            let fid = try FID.generate().description
            let tokenless = try await engine.register(try Self.request(token: nil, fid: fid))
            #expect(!tokenless.isExisting && !tokenless.fidWasAssigned)
            let repeated = try await engine.register(try Self.request(token: nil, fid: fid))
            #expect(repeated.isExisting && repeated.installation.fid == tokenless.installation.fid)
            #expect(try engine.installationCount() == 2)
            try engine.close()

            let reopened = try Engine(directory: directory, durability: .none)
            #expect(try reopened.installationCount() == 2)
            try reopened.close()
        }
    }

    @Test func aTokenShapedLikeAFIDStaysAddressableByToken() async throws {
        let engine = Engine()
        let shaped = "cAbCdEfGhIjKlMnOpQrStU"
        #expect(FID(shaped) != nil, "the token is a valid FID too")
        let installation = try await engine.register(try Self.request(token: shaped)).installation
        #expect(installation.fid.description != shaped)
        let address = try #require(RegistrationAddress(parsing: shaped))
        #expect(try engine.installation(address).fid == installation.fid)
        #expect(try await engine.subscribe([shaped].addresses, to: TopicName("news")!) == [.ok])
        #expect(try engine.topics(of: address) == [TopicName("news")!])
        // Its own FID still names it, and a FID that names an installation wins over a token.
        #expect(try engine.installation(.fid(installation.fid)).token == RegistrationToken(shaped))
    }

    @Test func rotatedAndDeletedRegistrationsAreUnregisteredPerItem() async throws {
        let engine = Engine()
        let rotated = try await engine.register(try Self.request(token: "old-token")).installation
        _ = try await engine.refreshToken(.fid(rotated.fid), to: RegistrationToken("new-token")!)
        let deleted = try await engine.register(try Self.request(token: "deleted-token")).installation
        try await engine.deleteInstallation(deleted.fid)
        let results = try await engine.subscribe(["old-token", "deleted-token", deleted.fid.description, "never-seen", "new-token"].addresses, to: TopicName("t")!)
        #expect(results == [.failed(.unregistered), .failed(.unregistered), .failed(.unregistered), .failed(.notFound), .ok])
        let removed = try await engine.unsubscribe(["old-token", "new-token"].addresses, from: TopicName("t")!)
        #expect(removed == [.failed(.unregistered), .ok])
    }
}
