import FanoutCore
import FanoutTestSupport
import Foundation
import Testing

/// Recovery from the log alone, on logs written record by record: the log reader hands the
/// replaying thread a few thousand records at a time while it decodes the rest of a segment, so
/// these logs span several segments, and segments of many such pieces. The state must be every
/// record applied in LSN order, and a record that cannot apply or cannot be decoded must be named.
@Suite("Log replay")
struct LogReplayTests {
    static let other = ProjectID("other-project")!

    static func fid(_ seed: Int) -> FID {
        // Each of the seed's three low bytes in several of the 17, so that seeds below 2^24 differ.
        FID.make(fromRandomBytes: (0..<17).map { UInt8(truncatingIfNeeded: seed >> (8 * ($0 % 3)) &+ $0 &* 29) })
    }

    static func register(_ project: ProjectID, fid seed: Int, token: String, at millisecond: Int64) -> WALRecord {
        .register(project, .init(
            fid: Self.fid(seed), token: RegistrationToken(token)!, platform: .android, appID: AppID("1:1:android:a")!,
            device: DeviceDetails(), apnsToken: nil, at: Timestamp(millisecondsSinceEpoch: millisecond)
        ))
    }

    /// Two projects' registrations, with touches between them.
    static let records: [WALRecord] = [
        Self.register(.default, fid: 0, token: "token-a", at: 1),
        Self.register(.default, fid: 1, token: "token-b", at: 2),
        .createProject(Self.other),
        Self.register(Self.other, fid: 2, token: "token-a", at: 3),
        Self.register(.default, fid: 3, token: "token-d", at: 4),
        .touch(.default, fid: Self.fid(1), at: Timestamp(millisecondsSinceEpoch: 9)),
        Self.register(.default, fid: 4, token: "token-e", at: 5),
        Self.register(Self.other, fid: 5, token: "token-f", at: 6),
    ]

    /// A data directory whose log holds `segments`, each a list of batches (of encoded records:
    /// `WALFormat.encode`, or any bytes), numbered on from LSN 0.
    static func directory(_ segments: [[[[UInt8]]]]) throws -> String {
        let directory = TemporaryDirectory.path("fanout-log-replay")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var lsn: UInt64 = 0
        for (index, batches) in segments.enumerated() {
            var bytes = WALFormat.segmentHeader(index: UInt64(index), firstLSN: lsn)
            for batch in batches {
                bytes += WALFormat.batch(rawRecords: batch, firstLSN: lsn)
                lsn += UInt64(batch.count)
            }
            let name = String(repeating: "0", count: 16 - String(index).count) + String(index)
            try Data(bytes).write(to: URL(fileURLWithPath: "\(directory)/segment-\(name).wal"))
        }
        return directory
    }

    /// `records` in two segments of two batches each.
    static func directory(_ records: [WALRecord]) throws -> String {
        let encoded = records.map(WALFormat.encode)
        let quarters = stride(from: 0, to: encoded.count, by: (encoded.count + 3) / 4).map {
            Array(encoded[$0..<min($0 + (encoded.count + 3) / 4, encoded.count)])
        }
        return try Self.directory([Array(quarters[..<2]), Array(quarters[2...])])
    }

    @Test func theReplayedStateHasEveryLoggedFIDTokenAndTime() throws {
        let directory = try Self.directory(Self.records)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let engine = try Engine(directory: directory, durability: .none)
        defer { try? engine.close() }
        #expect(engine.recovery?.records == Self.records.count)
        #expect(engine.recovery?.segments == 2)
        let expected: [(ProjectID, String, Int, Int64, Int64)] = [
            (.default, "token-a", 0, 1, 1), (.default, "token-b", 1, 2, 9), (.default, "token-d", 3, 4, 4),
            (.default, "token-e", 4, 5, 5), (Self.other, "token-a", 2, 3, 3), (Self.other, "token-f", 5, 6, 6),
        ]
        for (project, token, seed, created, seen) in expected {
            let installation = try engine.installation(.token(RegistrationToken(token)!), in: project)
            #expect(installation.fid == Self.fid(seed), "\(project) \(token)")
            #expect(installation.createdAt.millisecondsSinceEpoch == created, "\(project) \(token)")
            #expect(installation.lastSeen.millisecondsSinceEpoch == seen, "\(project) \(token)")
        }
        #expect(try engine.installationCount() == 4)
        #expect(try engine.installationCount(in: Self.other) == 2)
    }

    /// Registrations, then subscriptions of every other one, then deletions of every third: each
    /// segment is several of the reader's pieces, and later records depend on earlier pieces'.
    @Test func aLongLogReplaysInOrderAcrossPiecesAndSegments() throws {
        let count = 12_000
        let topic = TopicName("news")!
        var records: [WALRecord] = (0..<count).map { Self.register(.default, fid: $0, token: "token-\($0)", at: Int64($0)) }
        records += stride(from: 0, to: count, by: 2).map { .subscribeFIDs(.default, topic: topic, fids: [Self.fid($0)]) }
        records += stride(from: 0, to: count, by: 3).map { .deleteInstallation(.default, fid: Self.fid($0)) }
        let directory = try Self.directory(records)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let engine = try Engine(directory: directory, durability: .none)
        defer { try? engine.close() }
        #expect(engine.recovery?.records == records.count)
        #expect(try engine.installationCount() == count - (count + 2) / 3)
        #expect(try engine.subscriberCount(of: topic) == (0..<count).filter { $0 % 2 == 0 && $0 % 3 != 0 }.count)
        for index in 0..<count {
            let installation = try? engine.installation(.token(RegistrationToken("token-\(index)")!))
            #expect(installation?.fid == (index % 3 == 0 ? nil : Self.fid(index)), "token-\(index)")
            if let installation {
                #expect(try engine.topics(of: .fid(installation.fid)) == (index % 2 == 0 ? [topic] : []), "token-\(index)")
            }
        }
    }

    /// Subscriptions of 300 to 1000 installations (replay makes their reverse-list entries on a
    /// second thread) in a log that interleaves them with registrations, which replay alongside,
    /// and with what must see those entries first: unsubscriptions, deletions, small
    /// subscriptions and another project's. After a restart, every installation's topics and every
    /// topic's subscriber count are what they were.
    @Test(arguments: [3, 4] as [UInt64])
    func largeSubscriptionsReplayAsTheyWereApplied(seed: UInt64) async throws {
        var random = SeededRandomNumberGenerator(seed: seed)
        let directory = TemporaryDirectory.path("fanout-log-replay")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let topics = (0..<5).map { TopicName("topic-\($0)")! }
        var fids: [ProjectID: [FID]] = [.default: [], Self.other: []]
        let engine = try Engine(directory: directory, durability: .none)
        try await engine.createProject(Self.other)
        for step in 0..<36 {
            let project = step % 6 == 5 ? Self.other : ProjectID.default
            let requests = (0..<250).map { index in
                RegistrationRequest(token: RegistrationToken("token-\(step)-\(index)")!, platform: .android, appID: AppID("1:1:android:a")!)
            }
            for result in try await engine.register(requests, in: project) {
                fids[project]!.append(try result.get().installation.fid)
            }
            let chosen = fids[project]!.shuffled(using: &random).prefix(Int.random(in: 300...1000, using: &random))
            _ = try await engine.subscribe(chosen.map { .fid($0) }, to: topics.randomElement(using: &random)!, in: project)
            let some = fids[project]!.shuffled(using: &random)
            switch step % 4 {
            case 1: _ = try await engine.unsubscribe(some.prefix(400).map { .fid($0) }, from: topics.randomElement(using: &random)!, in: project)
            case 2:
                for fid in some.prefix(15) { _ = try await engine.deleteInstallation(fid, in: project) }
                fids[project]!.removeAll { some.prefix(15).contains($0) }
            case 3: _ = try await engine.subscribe(some.prefix(5).map { .fid($0) }, to: topics.randomElement(using: &random)!, in: project)
            default: break
            }
        }
        func state(of engine: Engine) throws -> [String] {
            var lines: [String] = []
            for project in [ProjectID.default, Self.other] {
                for topic in topics { lines.append("\(project) \(topic): \(try engine.subscriberCount(of: topic, in: project))") }
                for fid in fids[project]! { lines.append("\(project) \(fid): \(try engine.topics(of: .fid(fid), in: project))") }
            }
            return lines
        }
        let before = try state(of: engine)
        try engine.close()
        let reopened = try Engine(directory: directory, durability: .none)
        defer { try? reopened.close() }
        let after = try state(of: reopened)
        #expect(after.count == before.count)
        for (was, now) in zip(before, after) where was != now {
            Issue.record("after the restart \(now), before it \(was)")
        }
        // The log did have large subscriptions, and installations in several topics.
        #expect(before.filter { $0.hasSuffix("]") && $0.contains(", ") }.count > 1000)
    }

    /// Replay applies a logged subscription without the per-installation limit, which admitted it
    /// when it was acknowledged: a lower limit since does not drop it (it refuses new ones).
    @Test func aLoweredTopicLimitKeepsWhatWasAcknowledged() async throws {
        let directory = TemporaryDirectory.path("fanout-log-replay")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let topics = (0..<3).map { TopicName("topic-\($0)")! }
        var configuration = EngineConfiguration()
        configuration.maximumTopicsPerInstallation = 3
        let engine = try Engine(directory: directory, durability: .none, configuration: configuration)
        let request = RegistrationRequest(token: RegistrationToken("token-a")!, platform: .android, appID: AppID("1:1:android:a")!)
        let fid = try await engine.register(request).installation.fid
        for topic in topics { #expect(try await engine.subscribe([.fid(fid)], to: topic) == [.ok]) }
        try engine.close()

        configuration.maximumTopicsPerInstallation = 2
        let reopened = try Engine(directory: directory, durability: .none, configuration: configuration)
        defer { try? reopened.close() }
        #expect(try reopened.topics(of: .fid(fid)) == topics)
        #expect(try await reopened.subscribe([.fid(fid)], to: TopicName("topic-3")!) == [.failed(.tooManyTopics)])
    }

    /// A registration whose logged FID another installation holds: the log disagrees with itself,
    /// and start-up names that record's LSN.
    @Test func aRecordThatCannotApplyIsNamedByItsLSN() throws {
        var records = Self.records
        records.append(Self.register(.default, fid: 6, token: "token-g", at: 7))
        records.append(Self.register(.default, fid: 0, token: "token-h", at: 8))  // FID 0 is token-a's
        let directory = try Self.directory(records)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let error = #expect(throws: FanoutError.self) { try Engine(directory: directory, durability: .none) }
        #expect(error?.code == .internal)
        #expect(error?.message.contains("replaying LSN \(records.count - 1) of") == true, "\(String(describing: error))")
        #expect(error?.message.contains("was not free") == true, "\(String(describing: error))")
    }

    /// A batch whose checksum is right but whose record does not decode, in the first segment: the
    /// start-up scan checks checksums only, so replay finds it, and refuses to start, naming it.
    @Test func aRecordThatDoesNotDecodeRefusesStart() throws {
        let good = Self.records.map(WALFormat.encode)
        let undecodable: [UInt8] = [0xEE, 1, 2, 3, 4, 5]
        let directory = try Self.directory([[Array(good[..<3]), [undecodable], Array(good[3..<5])], [Array(good[5...])]])
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let error = #expect(throws: FanoutError.self) { try Engine(directory: directory, durability: .none) }
        #expect(error?.code == .internal)
        #expect(error?.message.contains("corruption in WAL segment") == true, "\(String(describing: error))")
        #expect(error?.message.contains("(LSN 3)") == true, "\(String(describing: error))")
    }
}
