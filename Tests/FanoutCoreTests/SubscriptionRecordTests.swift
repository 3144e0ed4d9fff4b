@testable import FanoutCore
import FanoutTestSupport
import Testing

/// Subscription records name installations by slot, with 16 bits of the FID that replay checks:
/// a record naming an empty slot, or a slot that holds another installation, is refused instead
/// of subscribing someone else.
@Suite("Subscription records")
struct SubscriptionRecordTests {
    static let news = TopicName("news")!

    static func register(_ fid: FID) -> WALRecord {
        .register(.default, .init(fid: fid, token: nil, platform: .web, appID: AppID("1:1:web:a")!, device: DeviceDetails(), apnsToken: nil, at: Timestamp(millisecondsSinceEpoch: 1)))
    }

    @Test func replayChecksEachSlotAgainstItsInstallation() throws {
        var random = SeededRandomNumberGenerator(seed: 5)
        let first = FID.make(fromRandomBytes: random.bytes(17))
        var other = FID.make(fromRandomBytes: random.bytes(17))
        while SlotReference.check(of: other) == SlotReference.check(of: first) { other = FID.make(fromRandomBytes: random.bytes(17)) }
        var state = ProjectState(id: .default, configuration: EngineConfiguration())
        try state.replay(Self.register(first))
        try state.replay(.subscribe(.default, topic: Self.news, installations: [SlotReference(slot: 0, fid: first)]))
        #expect(state.topics.subscriberCount(of: Self.news) == 1)
        #expect(throws: FanoutError.self, "slot 0 holds another installation") {
            try state.replay(.unsubscribe(.default, topic: Self.news, installations: [SlotReference(slot: 0, fid: other)]))
        }
        #expect(throws: FanoutError.self, "slot 1 is empty") {
            try state.replay(.subscribe(.default, topic: Self.news, installations: [SlotReference(slot: 1, fid: other)]))
        }
        #expect(state.topics.subscriberCount(of: Self.news) == 1, "a refused record changes nothing")
        try state.replay(.unsubscribe(.default, topic: Self.news, installations: [SlotReference(slot: 0, fid: first)]))
        #expect(state.topics.subscriberCount(of: Self.news) == 0)
    }

    /// The bytes docs/wal-format.md gives subscribe and unsubscribe records (types 26 and 27),
    /// read back as written.
    @Test func subscriptionRecordsHaveTheDocumentedBytes() throws {
        func u32(_ value: Int) -> [UInt8] { withUnsafeBytes(of: UInt32(value).littleEndian, Array.init) }
        let references = [SlotReference(slot: 0x0102_0304, check: 0x0506), SlotReference(slot: 7, check: 0xFFFF)]
        for (record, type) in [
            (WALRecord.subscribe(.default, topic: Self.news, installations: references), UInt8(26)),
            (WALRecord.unsubscribe(.default, topic: Self.news, installations: references), UInt8(27)),
        ] {
            var writer = BinaryWriter()
            record.encode(into: &writer)
            let project = Array(ProjectID.default.value.utf8)
            let expected = [type] + u32(project.count) + project + u32(4) + Array("news".utf8) + u32(2)
                + [0x04, 0x03, 0x02, 0x01, 0x06, 0x05] + [0x07, 0x00, 0x00, 0x00, 0xFF, 0xFF]
            #expect(writer.bytes == expected)
            var reader = BinaryReader(writer.bytes)
            #expect(try WALRecord.decode(from: &reader) == record)
        }
    }

    /// A FID's 18 bytes and a subscription's `check`, computed from docs/wal-format.md's words
    /// alone (each character's index in the base64url alphabet, 6 bits each, the first the most
    /// significant), for a modern FID and a legacy Instance ID.
    @Test func aFIDsBytesAndCheckAreTheDocumentedOnes() throws {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        func number(_ characters: ArraySlice<UInt8>) -> UInt64 {
            characters.reduce(0) { $0 << 6 | UInt64(alphabet.firstIndex(of: $1)!) }
        }
        func bytes<T: FixedWidthInteger>(_ value: T) -> [UInt8] { withUnsafeBytes(of: value.littleEndian, Array.init) }
        let modern = "dGVmZ2hpamtsbW5vcHFyc3"
        let legacy = "dAbC_-12345"
        let cases: [(FID, first: UInt64, second: UInt64, last: UInt16)] = [
            (try #require(FID(modern)), number(Array(modern.utf8)[0..<10]), number(Array(modern.utf8)[10..<20]), UInt16(number(Array(modern.utf8)[20..<22]))),
            (try #require(FID(legacyInstanceID: legacy)), number(Array(legacy.utf8)[0..<10]), number(Array(legacy.utf8)[10..<11]), 0x8000),
        ]
        for (fid, first, second, last) in cases {
            var writer = BinaryWriter()
            writer.write(fid)
            #expect(writer.bytes == bytes(first) + bytes(second) + bytes(last), "\(fid)")
            #expect(SlotReference(slot: 0, fid: fid).check == UInt16(truncatingIfNeeded: second), "\(fid)")
        }
    }

    /// What the engine logs for a batch: the slots it subscribed, not the ones it refused.
    @Test func aSubscribeLogsTheSubscribedSlots() async throws {
        let log = InMemoryChangeLog()
        let engine = Engine(log: log)
        let a = try await engine.register(RegistrationRequest(token: RegistrationToken("record-a")!, platform: .web, appID: AppID("1:1:web:a")!))
        let b = try await engine.register(RegistrationRequest(token: RegistrationToken("record-b")!, platform: .web, appID: AppID("1:1:web:a")!))
        _ = try await engine.subscribe([.token(RegistrationToken("record-b")!), .token(RegistrationToken("unknown")!), .fid(a.installation.fid)], to: Self.news)
        guard case .subscribe(.default, Self.news, let installations)? = log.records.last else {
            Issue.record("unexpected \(log.records)")
            return
        }
        #expect(installations == [SlotReference(slot: b.installation.slot, fid: b.installation.fid), SlotReference(slot: a.installation.slot, fid: a.installation.fid)])
    }
}
