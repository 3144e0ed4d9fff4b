import FanoutCore
import FanoutTestSupport
import Foundation
import Synchronization
import Testing

/// The engine on a data directory: everything acknowledged survives close and reopen; damage is
/// handled as docs/wal-format.md says; a directory has one owner.
@Suite("Durable engine")
struct DurableEngineTests {
    /// The model test on a durable engine, closed and reopened (replaying the whole log) every 500
    /// operations; after each reopen the engine must still agree with the model on everything.
    @Test(arguments: [1, 2] as [UInt64])
    func reopenedEngineMatchesModel(seed: UInt64) async throws {
        try await TemporaryDirectory.with { directory in
            var harness = try Harness(seed: seed, directory: directory)
            for step in 0..<2500 {
                try await harness.randomOperation(step: step)
                if step % 500 == 499 {
                    try harness.reopen()
                    let recovery = try #require(harness.engine.recovery)
                    #expect(recovery.truncatedTail == nil)
                    try harness.compareEverything()
                }
            }
            try harness.engine.close()
        }
    }

    /// The same with a snapshot before every other reopen: recovery starts from the snapshot
    /// (users, bindings, subscriptions, last-seen times and tombstones included) and replays the rest.
    @Test(arguments: [3, 4] as [UInt64])
    func snapshotsPreserveEverything(seed: UInt64) async throws {
        try await TemporaryDirectory.with { directory in
            var harness = try Harness(seed: seed, directory: directory)
            for step in 0..<2500 {
                try await harness.randomOperation(step: step)
                if step % 250 == 249 {
                    if step % 500 == 499 {
                        try harness.engine.snapshot()
                        try harness.compareEverything()
                    }
                    try harness.reopen()
                    #expect((harness.engine.recovery?.snapshot != nil) == (step >= 499))
                    try harness.compareEverything()
                }
            }
            try harness.engine.close()
        }
    }

    /// Users' creation times, the clean-up setting and clean-ups come back from the log and from a
    /// snapshot, whatever the configuration of the engine that reopens it.
    @Test func anonymousCleanUpSurvivesTheLogAndSnapshots() async throws {
        try await TemporaryDirectory.with { directory in
            let clock = ManualClock()
            var engine = try Engine(directory: directory, durability: .always, clock: clock)
            var fids: [FID] = []
            for (index, user) in ["anon-a", "anon-b", "anon-c"].enumerated() {
                let installation = try await engine.register(
                    RegistrationRequest(token: RegistrationToken("t\(index)"), platform: .web, appID: AppID("app")!)
                ).installation
                fids.append(installation.fid)
                try await engine.bindDevice(.fid(installation.fid), to: UserID(user)!, anonymous: true)
                clock.advance(by: .days(10))
            }
            clock.advance(by: .days(1))  // day 31: anon-a, created on day 0, is due
            #expect(try await engine.cleanUpAnonymousUsers() == [UserID("anon-a")!])
            try await engine.setAnonymousCleanUp(true)  // day 31: the others now count from here
            let due = { (engine: Engine) throws in try engine.anonymousUsersDueForCleanUp() }
            clock.advance(by: .days(29))
            #expect(try due(engine).isEmpty)
            clock.advance(by: .days(1))  // day 61
            #expect(try due(engine) == [UserID("anon-b")!, UserID("anon-c")!])
            var configuration = EngineConfiguration()
            configuration.anonymousUserLifetime = .seconds(86_400)  // a reopening engine's own setting
            for snapshot in [false, true] {
                if snapshot { try engine.snapshot() }
                try engine.close()
                engine = try Engine(directory: directory, durability: .always, configuration: configuration, clock: clock)
                #expect(throws: FanoutError(.notFound, "", field: "user")) { try engine.user(UserID("anon-a")!) }
                #expect(try engine.installation(.fid(fids[0])).user == nil)
                #expect(try engine.anonymousCleanUpEnabledAt() == Timestamp(millisecondsSinceEpoch: ManualClock().now().millisecondsSinceEpoch + 31 * 86_400_000))
                #expect(try engine.users().map(\.createdAt.millisecondsSinceEpoch) == [10, 20].map { ManualClock().now().millisecondsSinceEpoch + $0 * 86_400_000 })
                try engine.close()
                engine = try Engine(directory: directory, durability: .always, clock: clock)
                #expect(try due(engine) == [UserID("anon-b")!, UserID("anon-c")!], "snapshot: \(snapshot)")
            }
            try engine.close()
        }
    }

    /// Opening and closing a directory without a change leaves no empty segment behind (offline
    /// commands open it); a crash after the manifest forgot the empty segment but before the file
    /// went leaves an unlisted empty segment, which opens cleanly.
    @Test func openingAndClosingLeavesNoEmptySegment() async throws {
        try await TemporaryDirectory.with { directory in
            func segments() throws -> [String] {
                try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".wal") }.sorted()
            }
            var engine = try Engine(directory: directory, durability: .always)
            let phone = try await engine.register(RegistrationRequest(token: RegistrationToken("t"), platform: .web, appID: AppID("app")!)).installation
            try engine.close()
            let written = try segments()
            for _ in 0..<3 {
                engine = try Engine(directory: directory, durability: .always)
                #expect(try engine.installation(.fid(phone.fid)).token == RegistrationToken("t"))
                try engine.close()
                #expect(try segments() == written, "no empty segment left")
                #expect(try WALDirectory.examine(directory).problems.isEmpty)
            }
            // The crash window: the empty segment still on disk, no longer in the manifest.
            engine = try Engine(directory: directory, durability: .always)
            let opened = try #require(try segments().last)
            let header = try Data(contentsOf: URL(fileURLWithPath: "\(directory)/\(opened)"))
            try engine.close()
            try header.write(to: URL(fileURLWithPath: "\(directory)/\(opened)"))
            engine = try Engine(directory: directory, durability: .always)
            #expect(try engine.installation(.fid(phone.fid)).token == RegistrationToken("t"))
            _ = try await engine.touch(.fid(phone.fid))
            try engine.close()
            engine = try Engine(directory: directory, durability: .always)
            #expect(try engine.installation(.fid(phone.fid)).lastSeen >= phone.lastSeen)
            try engine.close()
            #expect(try WALDirectory.examine(directory).problems.isEmpty)
        }
    }

    @Test func snapshotsAreLZ4FramesAndReplaceTheLog() async throws {
        try await TemporaryDirectory.with { directory in
            let engine = try Engine(directory: directory, durability: .always, segmentSize: 4096)
            for index in 0..<500 {
                try await engine.register(RegistrationRequest(token: RegistrationToken("token-\(index)"), platform: .ios, appID: AppID("app")!))
            }
            _ = try await engine.subscribe((0..<500).map { "token-\($0)" }.prefix(1000).map { $0 }.addresses, to: TopicName("news")!)
            let before = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".wal") }.count
            try await engine.register(RegistrationRequest(token: RegistrationToken("between"), platform: .web, appID: AppID("app")!))
            let path = try engine.snapshot()
            let right = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".wal") }.count
            try await engine.register(RegistrationRequest(token: RegistrationToken("after-snapshot"), platform: .web, appID: AppID("app")!))
            try engine.close()
            let after = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".wal") }.count
            #expect(before > 5 && right == 1, "the segments the snapshot covers are deleted once it is durable (\(before) -> \(right))")
            #expect(after <= 2, "and stay deleted after a stop (\(after))")
            // The stock lz4 tool accepts the file, when it is installed.
            if FileManager.default.isExecutableFile(atPath: "/usr/bin/lz4") {
                #expect(try ChildProcess.run("/usr/bin/lz4", ["-t", path]).status == 0, "lz4 -t accepts the snapshot")
            }

            let reopened = try Engine(directory: directory, durability: .none)
            #expect(reopened.recovery?.snapshot?.file == path)
            #expect(reopened.recovery?.records == 1, "only the registration after the snapshot is replayed")
            #expect(try reopened.installationCount() == 502)
            #expect(try reopened.subscriberCount(of: TopicName("news")!) == 500)
            try reopened.close()
        }
    }

    /// With `sincePreviousSnapshot` the log from the snapshot before the newest stays: one snapshot
    /// deletes nothing, the second deletes what the first covers.
    @Test func keepingThePreviousLog() async throws {
        try await TemporaryDirectory.with { directory in
            var configuration = EngineConfiguration()
            configuration.logRetention = .sincePreviousSnapshot
            let engine = try Engine(directory: directory, durability: .always, segmentSize: 4096, configuration: configuration)
            func segments() throws -> Int { try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".wal") }.count }
            for index in 0..<300 {
                try await engine.register(RegistrationRequest(token: RegistrationToken("token-\(index)"), platform: .ios, appID: AppID("app")!))
            }
            let before = try segments()
            try engine.snapshot()
            #expect(try segments() == before + 1, "one snapshot deletes no segment (a new one started)")
            for index in 300..<600 {
                try await engine.register(RegistrationRequest(token: RegistrationToken("token-\(index)"), platform: .ios, appID: AppID("app")!))
            }
            let between = try segments()
            try engine.snapshot()
            #expect(try segments() <= between - before + 1, "the second deletes the log the first covers")
            try engine.close()
            let reopened = try Engine(directory: directory, durability: .none)
            #expect(try reopened.installationCount() == 600)
            try reopened.close()
        }
    }

    @Test func aCorruptSnapshotWhoseLogIsGoneRefusesToStart() async throws {
        try await TemporaryDirectory.with { directory in
            let engine = try Engine(directory: directory, durability: .always, segmentSize: 1024)
            for index in 0..<100 {
                try await engine.register(RegistrationRequest(token: RegistrationToken("token-\(index)"), platform: .ios, appID: AppID("app")!))
            }
            let older = try engine.snapshot()
            try await engine.register(RegistrationRequest(token: RegistrationToken("between"), platform: .ios, appID: AppID("app")!))
            let path = try engine.snapshot()
            try await engine.register(RegistrationRequest(token: RegistrationToken("later"), platform: .ios, appID: AppID("app")!))
            try engine.close()
            // Both snapshots damaged: the log before the older one is gone.
            for file in [older, path] {
                var bytes = try Data(contentsOf: URL(fileURLWithPath: file))
                bytes[bytes.count / 2] ^= 0xFF
                try bytes.write(to: URL(fileURLWithPath: file))
            }
            do {
                _ = try Engine(directory: directory, durability: .none)
                Issue.record("started without the records the snapshot held")
            } catch let error as FanoutError {
                #expect(error.code == .internal)
                #expect(error.message.contains("records are missing"))
            }
        }
    }

    /// Group commit: with concurrent callers and `always`, one `fdatasync` acknowledges several
    /// records, and every caller gets its answer.
    @Test func concurrentCallersShareFsyncs() async throws {
        try TemporaryDirectory.with { directory in
            let engine = try Engine(directory: directory, durability: .always)
            let callers = 16
            let perCaller = 40
            // Real threads: `concurrentPerform` runs about one per core, and two callers can
            // alternate one record per batch forever; sixteen queue up behind every fdatasync.
            // They start together, so that a fast disk cannot serve them one after another.
            let group = DispatchGroup()
            let start = DispatchGroup()
            start.enter()
            for caller in 0..<callers {
                group.enter()
                Thread {
                    start.wait()
                    for index in 0..<perCaller {
                        let request = RegistrationRequest(token: RegistrationToken("c\(caller)-\(index)"), platform: .web, appID: AppID("app")!)
                        _ = try? engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in try changes.register(request) }.blockingUntilDurable()
                    }
                    group.leave()
                }.start()
            }
            start.leave()
            group.wait()
            let statistics = try #require(engine.logStatistics)
            #expect(try engine.installationCount() == callers * perCaller)
            #expect(statistics.records == callers * perCaller)
            #expect(statistics.syncs == statistics.batches, "always syncs every batch")
            #expect(statistics.syncs < statistics.records, "several records share a sync (\(statistics.syncs) syncs)")
            try engine.close()
            let reopened = try Engine(directory: directory, durability: .none)
            #expect(try reopened.installationCount() == callers * perCaller)
            try reopened.close()
        }
    }

    @Test func alwaysDurabilitySyncsAndReopens() async throws {
        try await TemporaryDirectory.with { directory in
            var harness = try Harness(seed: 7, directory: directory, durability: .always)
            for step in 0..<200 {
                try await harness.randomOperation(step: step)
            }
            try harness.reopen(durability: .always)
            try harness.compareEverything()
            try harness.engine.close()
        }
    }

    /// The async calls return once their changes are synced, with no thread blocked per caller: 64 tasks
    /// on the cooperative pool (2 threads here) register, subscribe and send; everything they were
    /// answered is there after a reopen.
    @Test func asyncCallsAcknowledgeWithoutBlocking() async throws {
        let path = TemporaryDirectory.path("fanout-test")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let engine = try Engine(directory: path, durability: .always)
        let synced = try await withThrowingTaskGroup(of: Int.self) { group in
            for task in 0..<64 {
                group.addTask {
                    for index in 0..<8 {
                        let token = "token-\(task)-\(index)"
                        _ = try await engine.register(RegistrationRequest(token: RegistrationToken(token), platform: .web, appID: AppID("app")!))
                        _ = try await engine.subscribe([token].addresses, to: TopicName("t\(task % 4)")!)
                    }
                    return 1
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(synced == 64)
        let sent = try await engine.send(Array(#"{"message":{"topic":"t0","data":{"k":"v"}}}"#.utf8))
        #expect(sent.enqueued == 128)
        let statistics = try #require(engine.logStatistics)
        #expect(statistics.records == 64 * 8 * 2 + 1)
        #expect(statistics.syncs < statistics.records, "group commit")
        // An error inside the body is thrown after the changes before it are durable.
        await #expect(throws: FanoutError.self) {
            try await engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in
                try changes.deleteInstallation(FID("cAECAwQFBgcICQoLDA0ODx")!)
            }.durable()
        }
        try engine.close()
        let reopened = try Engine(directory: path, durability: .none)
        #expect(try reopened.installationCount() == 512)
        #expect(try reopened.subscriberCount(of: TopicName("t1")!) == 128)
        #expect(try reopened.pendingDeliveries(for: .token(RegistrationToken("token-0-0")!)).count == 1)
        try reopened.close()
    }

    @Test func deliveryCountersStartAtZeroAfterRecovery() async throws {
        try await TemporaryDirectory.with { directory in
            let engine = try Engine(directory: directory, durability: .none)
            _ = try await engine.register(RegistrationRequest(token: RegistrationToken("t"), platform: .ios, appID: AppID("app")!))
            _ = try await engine.send(Array(#"{"message":{"token":"t","data":{"k":"v"}}}"#.utf8))
            #expect(try engine.deliveryStatistics().sends == 1)
            try engine.close()
            let reopened = try Engine(directory: directory, durability: .none)
            let statistics = try reopened.deliveryStatistics()
            #expect(statistics.sends == 0 && statistics.enqueued == 0, "replay is not counted")
            #expect(statistics.pending == 1 && statistics.messages == 1, "the state is back")
            try reopened.close()
        }
    }

    @Test func segmentsRollAndTheLogSpansThem() async throws {
        try await TemporaryDirectory.with { directory in
            let engine = try Engine(directory: directory, durability: .always, segmentSize: 4096)
            for index in 0..<300 {
                try await engine.register(RegistrationRequest(token: RegistrationToken("token-\(index)"), platform: .android, appID: AppID("app")!))
            }
            _ = try await engine.subscribe((0..<300).map { "token-\($0)" }.addresses, to: TopicName("t")!)
            try engine.close()
            let segments = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".wal") }
            #expect(segments.count > 3)
            let reopened = try Engine(directory: directory, durability: .none, segmentSize: 4096)
            #expect(try reopened.installationCount() == 300)
            #expect(try reopened.subscriberCount(of: TopicName("t")!) == 300)
            #expect(reopened.recovery?.records == 301)
            try reopened.close()
        }
    }

    @Test func aTornTailIsCutAndReported() async throws {
        try await TemporaryDirectory.with { directory in
            let engine = try Engine(directory: directory, durability: .always)
            for index in 0..<10 {
                try await engine.register(RegistrationRequest(token: RegistrationToken("token-\(index)"), platform: .web, appID: AppID("app")!))
            }
            try engine.close()
            // A crash in the middle of the last write leaves part of a batch behind.
            let segment = try #require(try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".wal") }.sorted().last)
            let path = "\(directory)/\(segment)"
            var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
            let fullLength = bytes.count
            bytes.removeLast(7)
            try bytes.write(to: URL(fileURLWithPath: path))

            let reopened = try Engine(directory: directory, durability: .always)
            let tail = try #require(reopened.recovery?.truncatedTail)
            #expect(tail.file == path)
            #expect(tail.offset < fullLength - 7)
            #expect(try reopened.installationCount() == 9, "the torn (unacknowledged) registration is gone, the rest stay")
            try await reopened.register(RegistrationRequest(token: RegistrationToken("after"), platform: .web, appID: AppID("app")!))
            try reopened.close()

            let again = try Engine(directory: directory, durability: .always)
            #expect(again.recovery?.truncatedTail == nil)
            #expect(try again.installationCount() == 10)
            try again.close()
        }
    }

    @Test func damageBeforeTheLastSegmentRefusesToStart() async throws {
        try await TemporaryDirectory.with { directory in
            let engine = try Engine(directory: directory, durability: .always, segmentSize: 2048)
            for index in 0..<100 {
                try await engine.register(RegistrationRequest(token: RegistrationToken("token-\(index)"), platform: .web, appID: AppID("app")!))
            }
            try engine.close()
            let segments = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".wal") }.sorted()
            #expect(segments.count > 2)
            let path = "\(directory)/\(segments[0])"
            var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
            bytes[100] ^= 0x40
            try bytes.write(to: URL(fileURLWithPath: path))
            do {
                _ = try Engine(directory: directory, durability: .none)
                Issue.record("opened a log with a corrupt early segment")
            } catch let error as FanoutError {
                #expect(error.code == .internal)
                #expect(error.message.contains(segments[0]))
                #expect(error.message.contains("checksum"))
            }
        }
    }

    @Test func aDirectoryHasOneOwner() throws {
        try TemporaryDirectory.with { directory in
            let engine = try Engine(directory: directory, durability: .none)
            #expect(throws: FanoutError(.unavailable, "")) { try Engine(directory: directory, durability: .none) }
            try engine.close()
            let second = try Engine(directory: directory, durability: .none)
            try second.close()
        }
    }

    /// A snapshot being written when the engine is closed finishes first (so no other engine can
    /// open the directory under it, as a cluster node's next role does), and none starts once the
    /// engine is closed.
    @Test func closingWaitsForTheSnapshotBeingWrittenAndRefusesTheNext() async throws {
        try await TemporaryDirectory.with { directory in
            let engine = try Engine(directory: directory, durability: .always)
            _ = try await engine.register(RegistrationRequest(platform: .web, appID: AppID("app")!))
            FileFaults.hold(.rename, pathContains: "\(directory)/snapshot-")
            // On threads of their own: a blocked call must not take one of the concurrency pool's.
            let snapshot = Task { try await Self.onThread { try engine.snapshot() } }
            // Held at its rename: the snapshot's temporary file is written.
            let deadline = ContinuousClock.now + .seconds(10)
            while !(try FileManager.default.contentsOfDirectory(atPath: directory).contains { $0.hasSuffix(".tmp") }), ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(10))
            }
            let hasClosed = Mutex(false)
            let closed = Task {
                try await Self.onThread {
                    try engine.close()
                    hasClosed.withLock { $0 = true }
                }
            }
            // Not a timing assertion: a close that does not wait returns long before this.
            try await Task.sleep(for: .milliseconds(300))
            #expect(!hasClosed.withLock { $0 }, "closing waits while the snapshot is written")
            FileFaults.release(pathContains: "\(directory)/snapshot-")
            let path = try await snapshot.value
            try await closed.value
            #expect(FileManager.default.fileExists(atPath: path), "the snapshot finished before the engine let go of its directory")
            #expect(throws: FanoutError(.failedPrecondition, "")) { try engine.snapshot() }
        }
    }

    /// Runs `body` on a thread of its own.
    static func onThread<Result: Sendable>(_ body: @escaping @Sendable () throws -> Result) async throws -> Result {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread { continuation.resume(with: Swift.Result { try body() }) }
        }
    }

    @Test func aClosedEngineRefusesChanges() async throws {
        try await TemporaryDirectory.with { directory in
            let engine = try Engine(directory: directory, durability: .none)
            try engine.close()
            await #expect(throws: FanoutError(.unavailable, "")) {
                try await engine.register(RegistrationRequest(platform: .web, appID: AppID("app")!))
            }
            #expect(try engine.installationCount() == 0, "nothing was applied")
        }
    }

    /// Closing finishes every consumer, and what they held waits again (debug builds check after
    /// it that no delivery is in flight without a consumer); no consumer attaches afterwards,
    /// since nothing it took could be acknowledged.
    @Test func aClosedEngineFinishesItsConsumersAndRefusesNewOnes() async throws {
        try await TemporaryDirectory.with { directory in
            let engine = try Engine(directory: directory, durability: .always)
            let request = RegistrationRequest(token: try RegistrationToken("held-1"), platform: .android, appID: AppID("app")!)
            let installation = try await engine.register(request)
            _ = try await engine.send(Array(#"{"message":{"token":"held-1","data":{"k":"v"}}}"#.utf8))
            let worker = try engine.attachConsumer(.platform(.android), credit: 10)
            #expect(worker.poll().map(\.fid) == [installation.installation.fid])

            try engine.close()
            #expect(worker.poll(maximum: 10, orWhenReady: {}).finished, "the worker's stream ended")
            #expect(throws: FanoutError(.unavailable, "")) { try engine.attachConsumer(.platform(.android), credit: 10) }
            let statistics = try engine.deliveryStatistics()
            #expect(statistics.consumers == 0)
            #expect(statistics.pending == 1, "the delivery the worker held still waits")
        }
    }

    /// A change becomes durable with nothing else happening: the engine queues its records under
    /// the project's lock and wakes the log's writer once the lock is released. (A change queued
    /// without the wake-up would wait for another change's, here for ever: this test then fails
    /// at its deadline instead of hanging the suite.)
    @Test(arguments: [Durability.always, .interval(milliseconds: 60_000)])
    func aLoneChangeBecomesDurable(durability: Durability) throws {
        try TemporaryDirectory.with { directory in
            let engine = try Engine(directory: directory, durability: durability)
            defer { try? engine.close() }
            for index in 0..<3 {
                let request = RegistrationRequest(token: try RegistrationToken("lone-\(index)"), platform: .android, appID: AppID("app")!)
                let durable = DispatchSemaphore(value: 0)
                engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in try changes.register(request) }
                    .whenDurable { _ in durable.signal() }
                try #require(durable.wait(timeout: .now() + 30) == .success, "change \(index) was not made durable in 30 s")
            }
        }
    }
}
