import FanoutCore
import FanoutTestSupport
import Foundation
import Logging
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The log failing under the engine (a full disk, an I/O error): the change is refused, no read
/// shows it, nothing acknowledged is lost, and writes resume without a restart once the disk works.
@Suite("Log failures")
struct LogFailureTests {
    static func request(_ token: String) -> RegistrationRequest {
        RegistrationRequest(token: RegistrationToken(token), platform: .android, appID: AppID("app")!)
    }

    static func isRegistered(_ engine: Engine, _ token: String) -> Bool {
        (try? engine.installation(.token(RegistrationToken(token)!))) != nil
    }

    /// Retries a registration until the log takes it again (the writer retries every few
    /// milliseconds in these tests); false if it never does within 30 seconds.
    static func registerOnceWritable(_ engine: Engine, _ token: String) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            if (try? await engine.register(Self.request(token))) != nil { return true }
            usleep(2000)
        }
        return false
    }

    @Test(arguments: [
        (FileFaults.Operation.write, ENOSPC), (.write, EIO), (.sync, EIO), (.sync, ENOSPC),
    ])
    func aFailedWriteIsRefusedInvisibleAndHeals(operation: FileFaults.Operation, code: Int32) async throws {
        try await TemporaryDirectory.with("fanout-fault") { directory in
            let engine = try Engine(directory: directory, durability: .always, logRetryInterval: .milliseconds(5))
            for index in 0..<10 { try await engine.register(Self.request("a\(index)")) }
            _ = try await engine.subscribe((0..<5).map { "a\($0)" }.addresses, to: TopicName("news")!)

            FileFaults.inject(.init(operation, pathContains: directory, code: code))
            await #expect(throws: FanoutError(.unavailable, "")) { try await engine.register(Self.request("refused")) }
            #expect(!Self.isRegistered(engine, "refused"), "a refused registration is not visible")
            await #expect(throws: FanoutError(.unavailable, "")) { try await engine.subscribe((5..<10).map { "a\($0)" }.addresses, to: TopicName("news")!) }
            #expect(try engine.subscriberCount(of: TopicName("news")!) == 5, "a refused subscription is not visible")
            #expect(try engine.installationCount() == 10, "reads still answer")
            #expect(throws: FanoutError(.unavailable, "")) { try engine.snapshot() }
            #expect(engine.logFailure?.code == .unavailable, "the engine says why it refuses")

            FileFaults.clear(pathContains: directory)
            #expect(await Self.registerOnceWritable(engine, "after"), "writes resume without a restart")
            #expect(engine.logFailure == nil)
            #expect(try engine.installationCount() == 11)
            // The refused batch (all of it, or the part a failed write left) was cut, and kept.
            let kept = try FileManager.default.contentsOfDirectory(atPath: "\(directory)/quarantine")
            #expect(kept.count == 1 && kept[0].contains(".wal.from-"), "\(kept)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: "\(directory)/quarantine/\(kept[0])")).count > 0)
            try engine.close()

            let reopened = try Engine(directory: directory, durability: .none)
            #expect(try reopened.installationCount() == 11)
            #expect(!Self.isRegistered(reopened, "refused") && Self.isRegistered(reopened, "after"))
            #expect(try reopened.subscriberCount(of: TopicName("news")!) == 5)
            #expect(reopened.recovery?.truncatedTail == nil, "the failed batch was cut when the log continued")
            try reopened.close()
            #expect(try WALDirectory.examine(directory).problems.isEmpty)
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".tmp") }
            #expect(leftovers.isEmpty)
        }
    }

    /// The failure is logged once at error level with its cause (and the recovery after it),
    /// however many changes are refused meanwhile.
    @Test func theFailureIsLoggedOnceWithItsCause() async throws {
        try await TemporaryDirectory.with("fanout-fault") { directory in
            let records = RecordingLogHandler.Records()
            let logger = Logger(label: "test") { _ in RecordingLogHandler(records: records) }
            let engine = try Engine(directory: directory, durability: .always, logRetryInterval: .milliseconds(5), logger: logger)
            try await engine.register(Self.request("first"))
            FileFaults.inject(.init(.sync, pathContains: directory, code: EIO))
            for index in 0..<5 { _ = try? await engine.register(Self.request("refused-\(index)")) }
            FileFaults.clear(pathContains: directory)
            #expect(await Self.registerOnceWritable(engine, "after"))
            try engine.close()
            let errors = records.entries.withLock { $0.filter { $0.level == .error } }
            #expect(errors.count == 1, "\(errors)")
            #expect(errors.first?.text.contains("Input/output error") == true)
            #expect(records.entries.withLock { $0.contains { $0.level == .notice && $0.text.contains("writes again") } })
        }
    }

    /// A snapshot taken while a change is applied but not yet durable waits for it: when the log
    /// then refuses the change, the snapshot is refused too, so the change cannot come back from it.
    @Test func aSnapshotNeverHoldsARefusedChange() async throws {
        try await TemporaryDirectory.with("fanout-fault") { directory in
            let engine = try Engine(directory: directory, durability: .always, logRetryInterval: .milliseconds(5))
            try await engine.register(Self.request("first"))
            // Only the log's syncs fail; the snapshot file could be written.
            FileFaults.inject(.init(.sync, pathContains: "\(directory)/segment-", code: EIO))
            let applied = engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in try changes.register(Self.request("refused")) }
            let snapshot = Result { try engine.snapshot() }
            #expect(throws: FanoutError.self) { try snapshot.get() }
            await #expect(throws: FanoutError.self) { try await applied.durable() }
            FileFaults.clear(pathContains: "\(directory)/segment-")
            #expect(await Self.registerOnceWritable(engine, "after"))
            try engine.close()
            let reopened = try Engine(directory: directory, durability: .none)
            #expect(!Self.isRegistered(reopened, "refused"))
            #expect(Self.isRegistered(reopened, "first") && Self.isRegistered(reopened, "after"))
            try reopened.close()
        }
    }

    /// A change's outcome read without waiting, as a server's event loop reads its waiting
    /// replies': acknowledged once durable; after a failed sync, refused with `UNAVAILABLE`, and
    /// `whenLogged` calls back for it (at once, once the log has said).
    @Test func aChangesOutcomeIsReadWithoutWaiting() async throws {
        try await TemporaryDirectory.with("fanout-fault") { directory in
            let engine = try Engine(directory: directory, durability: .always, logRetryInterval: .milliseconds(5))
            func register(_ token: String) -> Engine.Applied<RegistrationResult> {
                engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in try changes.register(Self.request(token)) }
            }
            func logged(_ applied: Engine.Applied<RegistrationResult>) async {
                await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in applied.whenLogged { done.resume() } }
            }
            let durable = register("durable")
            await logged(durable)
            #expect(durable.logOutcome() == .acknowledged)

            FileFaults.inject(.init(.sync, pathContains: "\(directory)/segment-", code: EIO))
            let refused = register("refused")
            await logged(refused)
            guard case .refused(let error)? = refused.logOutcome() else {
                Issue.record("expected a refusal, got \(String(describing: refused.logOutcome()))")
                return
            }
            #expect(error.code == .unavailable)
            await logged(refused)
            #expect(durable.logOutcome() == .acknowledged, "what was durable before the failure stays so")
            FileFaults.clear(pathContains: "\(directory)/segment-")
            #expect(await Self.registerOnceWritable(engine, "after"))
            try engine.close()
        }
    }

    /// Starting a new segment fails (the file cannot be created): the same guarantees.
    @Test func aFailedSegmentRollHeals() async throws {
        try await TemporaryDirectory.with("fanout-fault") { directory in
            let engine = try Engine(directory: directory, durability: .always, segmentSize: 512, logRetryInterval: .milliseconds(5))
            try await engine.register(Self.request("first"))
            FileFaults.inject(.init(.open, pathContains: directory, code: ENOSPC))
            var refused: [String] = []
            for index in 0..<10 {
                if (try? await engine.register(Self.request("r\(index)"))) == nil { refused.append("r\(index)") }
            }
            #expect(!refused.isEmpty, "a roll was needed and failed")
            for token in refused { #expect(!Self.isRegistered(engine, token)) }
            FileFaults.clear(pathContains: directory)
            #expect(await Self.registerOnceWritable(engine, "after"))
            let expected = try engine.installationCount()
            try engine.close()
            let reopened = try Engine(directory: directory, durability: .none)
            #expect(try reopened.installationCount() == expected)
            for token in refused { #expect(!Self.isRegistered(reopened, token)) }
            try reopened.close()
        }
    }

    /// Many callers at once while syncs start failing part-way: each caller's answer is the truth
    /// after a restart (acknowledged: present; refused: absent), and async callers agree.
    @Test func concurrentCallersGetTheTruth() async throws {
        try await TemporaryDirectory.with("fanout-fault") { directory in
            let engine = try Engine(directory: directory, durability: .always, logRetryInterval: .milliseconds(5))
            FileFaults.inject(.init(.sync, pathContains: directory, code: EIO, skip: 40))
            let outcomes = await withTaskGroup(of: [(String, Bool)].self) { group in
                for worker in 0..<4 {
                    group.addTask {
                        var outcomes: [(String, Bool)] = []
                        for index in 0..<60 {
                            let token = "w\(worker)-\(index)"
                            let accepted = (try? await engine.register(Self.request(token))) != nil
                            outcomes.append((token, accepted))
                        }
                        return outcomes
                    }
                }
                return await group.reduce(into: []) { $0 += $1 }
            }
            #expect(outcomes.contains { $0.1 } && outcomes.contains { !$0.1 }, "some were acknowledged, some refused")
            for (token, accepted) in outcomes where !accepted {
                #expect(!Self.isRegistered(engine, token), "refused \(token) is not visible")
            }
            FileFaults.clear(pathContains: directory)
            #expect(await Self.registerOnceWritable(engine, "after"))
            try engine.close()
            let reopened = try Engine(directory: directory, durability: .none)
            for (token, accepted) in outcomes {
                #expect(Self.isRegistered(reopened, token) == accepted, "\(token) acknowledged: \(accepted)")
            }
            try reopened.close()
        }
    }

    /// A real full disk: a small tmpfs (only when the tests run as root and may mount one).
    @Test func aRealFullDisk() async throws {
        guard getuid() == 0 else { return }
        let mountPoint = TemporaryDirectory.path("fanout-tmpfs")
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: mountPoint) }
        guard Self.run("/bin/mount", ["-t", "tmpfs", "-o", "size=256k", "tmpfs", mountPoint]) == 0 else { return }
        defer { _ = Self.run("/bin/umount", [mountPoint]) }

        let directory = "\(mountPoint)/data"
        let engine = try Engine(directory: directory, durability: .always, segmentSize: 1 << 20, logRetryInterval: .milliseconds(5))
        // Fill the disk, leaving a little room.
        let filler = "\(mountPoint)/filler"
        _ = FileManager.default.createFile(atPath: filler, contents: Data(count: 200 << 10))
        var acknowledged: [String] = []
        var refused: [String] = []
        for index in 0..<2000 {
            let token = "disk-\(index)-" + String(repeating: "x", count: 200)
            if (try? await engine.register(Self.request(token))) != nil {
                acknowledged.append(token)
            } else {
                refused.append(token)
                if refused.count >= 3 { break }
            }
        }
        #expect(!refused.isEmpty, "the disk filled up")
        for token in refused { #expect(!Self.isRegistered(engine, token)) }
        #expect(throws: FanoutError.self) { try engine.snapshot() }
        let names = try FileManager.default.contentsOfDirectory(atPath: directory)
        #expect(!names.contains { $0.hasSuffix(".tmp") }, "a failed snapshot leaves no temporary file: \(names)")

        try FileManager.default.removeItem(atPath: filler)
        #expect(await Self.registerOnceWritable(engine, "after-room"), "writes resume once there is room")
        try engine.close()
        let reopened = try Engine(directory: directory, durability: .none)
        #expect(try reopened.installationCount() == acknowledged.count + 1)
        for token in acknowledged { #expect(Self.isRegistered(reopened, token)) }
        for token in refused { #expect(!Self.isRegistered(reopened, token)) }
        try reopened.close()
    }

    private static func run(_ executable: String, _ arguments: [String]) -> Int32 {
        (try? ChildProcess.run(executable, arguments))?.status ?? -1
    }
}
