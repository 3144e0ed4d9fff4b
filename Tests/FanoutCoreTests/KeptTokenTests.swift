import FanoutCore
import FanoutTestSupport
import Testing

/// A registration token whose bytes a block keeps (how a register batch's decoder hands its
/// tokens and app ids over) is the token its bytes spell: the log writes it as it writes the same
/// token held as a string, and the registry knows it by those bytes (a retired token stays
/// retired), and keeps no block alive.
@Suite("Tokens kept in a block")
struct KeptTokenTests {
    /// Bytes a token is kept in, alive as long as a token holds them.
    private final class Block {
        let bytes: UnsafeMutableRawBufferPointer

        init(_ text: String) {
            self.bytes = .allocate(byteCount: text.utf8.count, alignment: 1)
            _ = self.bytes.initializeMemory(as: UInt8.self, from: text.utf8)
        }

        deinit { self.bytes.deallocate() }

        var kept: StoredToken {
            StoredToken(owner: self, start: UnsafeRawPointer(self.bytes.baseAddress!), count: self.bytes.count)
        }

        var token: RegistrationToken { RegistrationToken(keptIn: self.kept) }
    }

    @Test func aKeptTokenIsLoggedAsTheSameTokenHeldAsAString() throws {
        let text = String(repeating: "k", count: 150) + ":APA91b-kept"
        let kept = Block(text).token
        let made = try #require(RegistrationToken(text))
        let fid = try #require(FID("eWkQ0JhLD2hnwthI-tkvWz"))
        let at = Timestamp(millisecondsSinceEpoch: 1_767_225_600_000)
        let appID = try #require(AppID("1:1:android:a"))
        func register(_ token: RegistrationToken) -> WALRecord {
            .register(.default, WALRecord.RegisteredInstallation(fid: fid, token: token, platform: .android, appID: appID, device: DeviceDetails(), apnsToken: nil, at: at))
        }
        let records = [register(kept), WALRecord.refreshToken(.default, fid: fid, token: kept, at: at)]
        let expected = [register(made), WALRecord.refreshToken(.default, fid: fid, token: made, at: at)]
        #expect(records.map(WALFormat.encode) == expected.map(WALFormat.encode))
        // Read back from a segment: the token its bytes spell.
        let segment = WALFormat.segmentHeader(index: 0, firstLSN: 0) + WALFormat.batch(rawRecords: records.map(WALFormat.encode), firstLSN: 0)
        #expect(try WALSegmentReader.read(segment).batches.first?.records == expected)
    }

    @Test func aRetiredTokenComingBackKeptInABlockIsStillRetired() async throws {
        let text = "retired-then-kept:APA91b"
        let engine = Engine()
        let appID = try #require(AppID("1:1:web:a"))
        let registered = try await engine.register(RegistrationRequest(token: try #require(RegistrationToken(text)), platform: .web, appID: appID))
        _ = try await engine.deleteInstallation(registered.installation.fid)
        let items = RegistrationItems([.success(RegistrationRequest(token: Block(text).token, platform: .web, appID: appID))])
        let receipts = try await engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in
            try changes.registerReturningFIDs(items)
        }.durable()
        #expect(receipts == [.failed(FanoutError(.invalidArgument, "", field: "token"))])
        let fresh = RegistrationItems([.success(RegistrationRequest(token: Block("fresh-and-kept:APA91b").token, platform: .web, appID: appID))])
        let registeredFresh = try await engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in
            try changes.registerReturningFIDs(fresh)
        }.durable()
        guard case .registered(let freshFID, _, false)? = registeredFresh.first else {
            Issue.record("a fresh kept token is not registered: \(registeredFresh)")
            return
        }
        #expect(try engine.installation(.token(try #require(RegistrationToken("fresh-and-kept:APA91b")))).fid == freshFID)
    }

    /// What the registry keeps of a registration (the token's bytes, the app id) is its own: the
    /// blocks the request's token and app id were kept in go once the request does.
    @Test func theRegistryKeepsNoBlockAlive() async throws {
        weak var tokenBlock: Block?
        weak var appBlock: Block?
        let engine = Engine()
        do {
            let token = Block("kept-token:APA91b")
            let app = Block("1:1:android:kept")
            (tokenBlock, appBlock) = (token, app)
            let items = RegistrationItems([.success(RegistrationRequest(token: token.token, platform: .android, appID: AppID(keptIn: app.kept)))])
            let receipts = try await engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in
                try changes.registerReturningFIDs(items)
            }.durable()
            guard case .registered(_, _, false)? = receipts.first else {
                Issue.record("not registered: \(receipts)")
                return
            }
        }
        #expect(tokenBlock == nil && appBlock == nil, "a block outlived the registration")
        let installation = try engine.installation(.token(try #require(RegistrationToken("kept-token:APA91b"))))
        #expect(installation.appID == AppID("1:1:android:kept"))
    }
}
