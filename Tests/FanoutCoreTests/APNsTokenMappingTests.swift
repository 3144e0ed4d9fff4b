import FanoutCore
import FanoutTestSupport
import Testing

/// FCM's APNs token mapping: an APNs device token belongs to at most one iOS installation of a
/// project; setting it on another moves it; lookups find its holder; the log replays the moves.
@Suite("APNs token mapping")
struct APNsTokenMappingTests {
    static let first = APNsDeviceToken(String(repeating: "ab", count: 32))!
    static let second = APNsDeviceToken(String(repeating: "cd", count: 32))!

    static func register(_ engine: Engine, _ token: String, platform: Platform = .ios, apns: APNsDeviceToken? = nil) async throws -> Installation {
        try await engine.register(
            RegistrationRequest(token: RegistrationToken(token)!, platform: platform, appID: AppID("1:1:ios:a")!, apnsToken: apns)
        ).installation
    }

    @Test func aTokenBelongsToOneInstallationAndMovesWhenTaken() async throws {
        let engine = Engine()
        let phone = try await Self.register(engine, "phone", apns: Self.first)
        let tablet = try await Self.register(engine, "tablet")
        #expect(try engine.installation(forAPNsToken: Self.first).fid == phone.fid)

        let moved = try await engine.setAPNsToken(Self.first, of: .fid(tablet.fid))
        #expect(moved.apnsToken == Self.first)
        #expect(try engine.installation(.fid(phone.fid)).apnsToken == nil, "taken from the phone")
        #expect(try engine.installation(forAPNsToken: Self.first).fid == tablet.fid)

        // Registering with a token another holds takes it too.
        let watch = try await Self.register(engine, "watch", apns: Self.first)
        #expect(try engine.installation(.fid(tablet.fid)).apnsToken == nil)
        #expect(try engine.installation(forAPNsToken: Self.first).fid == watch.fid)

        // Updating replaces the old token, which then belongs to no one; clearing removes it.
        _ = try await engine.setAPNsToken(Self.second, of: .fid(watch.fid))
        #expect(throws: FanoutError(.notFound, "", field: "apnsToken")) { try engine.installation(forAPNsToken: Self.first) }
        _ = try await engine.setAPNsToken(nil, of: .fid(watch.fid))
        #expect(throws: FanoutError(.notFound, "", field: "apnsToken")) { try engine.installation(forAPNsToken: Self.second) }

        // Deleting the holder frees the token.
        _ = try await engine.setAPNsToken(Self.second, of: .fid(phone.fid))
        try await engine.deleteInstallation(phone.fid)
        #expect(throws: FanoutError(.notFound, "", field: "apnsToken")) { try engine.installation(forAPNsToken: Self.second) }
    }

    @Test func onlyIOSInstallationsTakeAnAPNsToken() async throws {
        let engine = Engine()
        let android = try await Self.register(engine, "android", platform: .android)
        await #expect(throws: FanoutError(.invalidArgument, "", field: "apnsToken")) {
            try await engine.setAPNsToken(Self.first, of: .fid(android.fid))
        }
        await #expect(throws: FanoutError(.notFound, "", field: "registration")) {
            try await engine.setAPNsToken(Self.first, of: .token(RegistrationToken("nobody")!))
        }
    }

    @Test func movesReplayFromTheLogAndASnapshot() async throws {
        try await TemporaryDirectory.with { directory in
            var engine = try Engine(directory: directory, durability: .always)
            let phone = try await Self.register(engine, "phone", apns: Self.first)
            let tablet = try await Self.register(engine, "tablet")
            _ = try await engine.setAPNsToken(Self.first, of: .fid(tablet.fid))
            _ = try await engine.setAPNsToken(Self.second, of: .fid(phone.fid))
            for snapshot in [false, true] {
                if snapshot { try engine.snapshot() }
                try engine.close()
                engine = try Engine(directory: directory, durability: .always)
                #expect(try engine.installation(forAPNsToken: Self.first).fid == tablet.fid, "snapshot: \(snapshot)")
                #expect(try engine.installation(forAPNsToken: Self.second).fid == phone.fid)
                #expect(try engine.installation(.fid(phone.fid)).apnsToken == Self.second)
            }
            try engine.close()
        }
    }
}
