import FanoutCore
import FanoutTestSupport
import Testing

/// Legacy 11-character Instance IDs as a project setting (fcm-rules.md section 6): apps migrated
/// from Instance ID keep theirs as their FID. Off by default; on, registrations keep an offered one
/// and sends may name one; the setting and the installations replay from the log and a snapshot.
@Suite("Legacy Instance IDs")
struct LegacyInstanceIDTests {
    static let legacy = "dAbC_-12345"

    @Test func aLegacyInstanceIDIsElevenCharactersOfAFID() throws {
        let fid = try #require(FID(legacyInstanceID: Self.legacy))
        #expect(fid.isLegacyInstanceID && fid.description == Self.legacy)
        #expect(FID(Self.legacy) == nil, "not a modern FID")
        #expect(FID(Self.legacy, allowingLegacy: true) == fid && FID(Self.legacy, allowingLegacy: false) == nil)
        #expect(FID(packed: fid.packed) == fid, "the packed form (the log's) round-trips")
        for bad in ["aAbC_-12345", "dAbC_-1234", "dAbC_-123456", "dAbC+-12345", "dAbC/-12345", "dAbC=-12345", ""] {
            #expect(FID(legacyInstanceID: bad) == nil, "\(bad)")
        }
        let modern = try #require(FID("eWkQ0JhLD2hnwthI-tkvWz"))
        #expect(!modern.isLegacyInstanceID && FID(packed: modern.packed) == modern)
        #expect(fid != FID(legacyInstanceID: "dAbC_-12346"))
    }

    static func register(_ engine: Engine, offering fid: String, token: String) async throws -> RegistrationResult {
        try await engine.register(RegistrationRequest(offeredFID: fid, token: RegistrationToken(token)!, platform: .android, appID: AppID("1:1:android:a")!))
    }

    @Test func theProjectSettingDecidesAndTheLogKeepsIt() async throws {
        try await TemporaryDirectory.with { directory in
            var engine = try Engine(directory: directory, durability: .always)
            // Off: the offered ID is replaced, and a send naming one is refused.
            let refused = try await Self.register(engine, offering: Self.legacy, token: "token-a")
            #expect(refused.fidWasAssigned && refused.installation.fid.description != Self.legacy)
            await #expect(throws: FanoutError(.invalidArgument, "", field: "message.fid")) {
                _ = try await engine.send(Array(#"{"message":{"fid":"\#(Self.legacy)","data":{"k":"v"}}}"#.utf8))
            }
            await #expect(throws: FanoutError(.invalidArgument, "", field: "message.fids[1]")) {
                _ = try await engine.send(Array(#"{"message":{"fids":["eWkQ0JhLD2hnwthI-tkvWz","\#(Self.legacy)"],"data":{"k":"v"}}}"#.utf8))
            }

            // On: kept, addressable by the 11 characters, and a send reaches it.
            #expect(try await engine.setLegacyInstanceIDs(true))
            let kept = try await Self.register(engine, offering: Self.legacy, token: "token-b")
            #expect(!kept.fidWasAssigned && kept.installation.fid.description == Self.legacy && kept.installation.fid.isLegacyInstanceID)
            let address = try #require(RegistrationAddress(parsing: Self.legacy))
            #expect(try engine.installation(address).token?.value == "token-b")
            #expect(try await engine.subscribe([address], to: TopicName("news")!) == [.ok])
            let sent = try await engine.send(Array(#"{"message":{"fid":"\#(Self.legacy)","data":{"k":"v"}}}"#.utf8))
            #expect(sent.enqueued == 1)

            for snapshot in [false, true] {
                if snapshot { _ = try engine.snapshot() }
                try engine.close()
                engine = try Engine(directory: directory, durability: .always)
                #expect(try engine.acceptsLegacyInstanceIDs(), "snapshot: \(snapshot)")
                #expect(try engine.installation(address).fid.description == Self.legacy)
                #expect(try engine.topics(of: address) == [TopicName("news")!])
                #expect(try engine.pendingDeliveries(for: address).count == 1)
            }

            // Off again: what was registered stays addressable, new ones are replaced again.
            #expect(try await engine.setLegacyInstanceIDs(false) == false)
            #expect(try engine.installation(address).token?.value == "token-b")
            let again = try await Self.register(engine, offering: "cZZZZZZZZZZ", token: "token-c")
            #expect(again.fidWasAssigned)
            try await engine.deleteInstallation(FID(legacyInstanceID: Self.legacy)!)
            #expect(throws: FanoutError(.unregistered, "", field: "registration")) { try engine.installation(address) }
            try engine.close()
        }
    }

    /// A batch's items are read as REGISTER reads them: an offered legacy Instance ID is kept in a
    /// project that accepts them, next to items offering a FID, nothing, or text that is neither.
    @Test func aBatchKeepsAnOfferedLegacyInstanceIDWhereTheProjectAcceptsThem() async throws {
        let engine = try Engine()
        func batch(_ suffix: String) -> [RegistrationRequest] {
            [
                RegistrationRequest(offeredFID: "eWkQ0JhLD2hnwthI-tkv" + suffix, token: RegistrationToken("modern-" + suffix)!, platform: .web, appID: AppID("1:1:web:a")!),
                RegistrationRequest(offeredFID: "dAbC_-123" + suffix, token: RegistrationToken("legacy-" + suffix)!, platform: .android, appID: AppID("1:1:android:a")!),
                RegistrationRequest(offeredFID: "neither", token: RegistrationToken("neither-" + suffix)!, platform: .web, appID: AppID("1:1:web:a")!),
                RegistrationRequest(token: RegistrationToken("none-" + suffix)!, platform: .web, appID: AppID("1:1:web:a")!),
            ]
        }
        func assigned(_ results: [Result<RegistrationResult, FanoutError>]) throws -> [Bool] {
            try results.map { try $0.get().fidWasAssigned }
        }
        #expect(try assigned(try await engine.register(batch("Aa"))) == [false, true, true, true], "refused by default")
        #expect(try await engine.setLegacyInstanceIDs(true))
        let accepted = try await engine.register(batch("Bb"))
        #expect(try assigned(accepted) == [false, false, true, true])
        #expect(try accepted[1].get().installation.fid.description == "dAbC_-123Bb")
        #expect(try accepted[1].get().installation.fid.isLegacyInstanceID)
    }
}
