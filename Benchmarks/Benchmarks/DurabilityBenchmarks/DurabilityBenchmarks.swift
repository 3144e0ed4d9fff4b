import Benchmark
import BenchmarkSupport
import FanoutCore
import Foundation

// Durable mutations through the write-ahead log: registrations (one record each, about 200 bytes)
// from 1, 16 and 256 concurrent callers (real threads), with durability `always` and
// `interval(5)`, next to the raw rate of `write` + `fdatasync` on the same disk. Each iteration
// runs 2048 mutations (at least 64 per caller) on a fresh engine in a temporary directory;
// latencies are per mutation. The `durably` variants (named before the engine's calls became async) run them from tasks that suspend (no thread
// blocked per caller) while their batch syncs.

let benchmarks: @Sendable () -> Void = {
    Benchmark(
        "Durability.fdatasync.4KiB",
        configuration: .init(metrics: [.wallClock, .throughput], maxDuration: .seconds(3), maxIterations: 500)
    ) { benchmark in
        let path = NSTemporaryDirectory() + "fanout-fsync-\(UUID().uuidString)"
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        defer {
            close(descriptor)
            unlink(path)
        }
        let page = [UInt8](repeating: 7, count: 4096)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            _ = page.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            fdatasync(descriptor)
        }
    }

    let recovery: [BenchmarkMetric] = [
        .custom("open from log (ms)", useScalingFactor: false),
        .custom("open from snapshot (ms)", useScalingFactor: false),
        .custom("log size (MiB)", useScalingFactor: false),
        .custom("snapshot size (MiB)", useScalingFactor: false),
    ]
    Benchmark(
        "Durability.recovery.1Mx20",
        configuration: .init(metrics: recovery, warmupIterations: 0, maxIterations: 1)
    ) { benchmark in
        let figures = RecoveryLoad.run()
        benchmark.measurement(recovery[0], figures.logMilliseconds)
        benchmark.measurement(recovery[1], figures.snapshotMilliseconds)
        benchmark.measurement(recovery[2], figures.logMegabytes)
        benchmark.measurement(recovery[3], figures.snapshotMegabytes)
    }

    let custom: [BenchmarkMetric] = [
        .custom("mutations per second", polarity: .prefersLarger, useScalingFactor: false),
        .custom("latency p50 (us)", useScalingFactor: false),
        .custom("latency p99 (us)", useScalingFactor: false),
        .custom("mutations per fdatasync", polarity: .prefersLarger, useScalingFactor: false),
    ]
    for (label, durability) in [("always", Durability.always), ("interval5ms", Durability.interval(milliseconds: 5))] {
        for callers in [1, 16, 256] {
            Benchmark(
                "Durability.register.\(label).callers\(callers)",
                configuration: .init(metrics: custom, warmupIterations: 1, maxDuration: .seconds(10), maxIterations: 8)
            ) { benchmark in
                let figures = DurableLoad.run(durability: durability, callers: callers, mutations: max(2048, callers * 64))
                benchmark.measurement(custom[0], figures.perSecond)
                benchmark.measurement(custom[1], figures.p50Microseconds)
                benchmark.measurement(custom[2], figures.p99Microseconds)
                benchmark.measurement(custom[3], figures.perSync)
            }
        }
    }

    // The same registrations from concurrent tasks through the async `Engine.register`: suspended, not blocked,
    // while their batch syncs (how a server on event loops or Swift concurrency calls the engine).
    for tasks in [16, 64, 256, 1024] {
        Benchmark(
            "Durability.register.always.durably.tasks\(tasks)",
            configuration: .init(metrics: custom, warmupIterations: 1, maxDuration: .seconds(10), maxIterations: 8)
        ) { benchmark async in
            let figures = await DurableLoad.runTasks(tasks: tasks, mutations: max(4096, tasks * 16))
            benchmark.measurement(custom[0], figures.perSecond)
            benchmark.measurement(custom[1], figures.p50Microseconds)
            benchmark.measurement(custom[2], figures.p99Microseconds)
            benchmark.measurement(custom[3], figures.perSync)
        }
    }
}

enum RecoveryLoad {
    /// Builds 1M installations (163-byte tokens) x 20 topics in a durable engine (16 registering
    /// threads, subscriptions in batches of 1000), then times opening the directory from the log
    /// alone (the median of three opens), and once after a snapshot. Returns milliseconds and
    /// megabytes.
    static func run() -> (logMilliseconds: Int, snapshotMilliseconds: Int, logMegabytes: Int, snapshotMegabytes: Int) {
        let directory = NSTemporaryDirectory() + "fanout-recovery-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let installations = 1_000_000
        @Sendable func token(_ index: Int) -> String { "\(index):APA91b" + String(repeating: "x", count: 163 - 7 - String(index).count) }
        do {
            let engine = try! Engine(directory: directory, durability: .none)
            DispatchQueue.concurrentPerform(iterations: 16) { part in
                for index in stride(from: part, to: installations, by: 16) {
                    _ = try! engine.blocking { (changes: inout Engine.Changes) throws(FanoutError) in try changes.register(RegistrationRequest(token: RegistrationToken(token(index))!, platform: .android, appID: AppID("1:1:android:a")!)) }
                }
            }
            DispatchQueue.concurrentPerform(iterations: 20) { topic in
                for start in stride(from: 0, to: installations, by: 1000) {
                    _ = try! engine.blocking { (changes: inout Engine.Changes) throws(FanoutError) in try changes.subscribe((start..<start + 1000).map { .token(RegistrationToken(token($0))!) }, to: TopicName("topic-\(topic)")!) }
                }
            }
            try! engine.close()
        }
        func megabytes(_ suffix: String) -> Int {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
            let bytes = names.filter { $0.hasSuffix(suffix) }.reduce(0) { total, name in
                total + ((try? FileManager.default.attributesOfItem(atPath: directory + "/" + name)[.size] as? Int) ?? 0)
            }
            return bytes >> 20
        }
        // A copy of the directory, to time recovery again and again (`fanout snapshot` on copies of it).
        if let keep = ProcessInfo.processInfo.environment["FANOUT_RECOVERY_KEEP_DIRECTORY"] {
            _ = try? FileManager.default.copyItem(atPath: directory, toPath: keep)
        }
        let logMegabytes = megabytes(".wal")
        // The load wrote the log without syncing: flush it now, so that the kernel's writeback
        // does not run (and take a core) while the open is timed.
        sync()
        // Opened three times (the median counts): this VM's speed drifts by 20% from one minute
        // to the next, and one open is one sample of it. The last one writes the snapshot.
        var logTimes: [Duration] = []
        for open in 1...3 {
            let start = ContinuousClock.now
            let fromLog = try! Engine(directory: directory, durability: .none)
            logTimes.append(ContinuousClock.now - start)
            precondition(try! fromLog.subscriberCount(of: TopicName("topic-7")!) == installations)
            if open == 3 { try! fromLog.snapshot() }
            try! fromLog.close()
            sync()
        }
        let logTime = logTimes.sorted()[1]
        let start = ContinuousClock.now
        let fromSnapshot = try! Engine(directory: directory, durability: .none)
        let snapshotTime = ContinuousClock.now - start
        precondition(try! fromSnapshot.installationCount() == installations)
        try! fromSnapshot.close()
        func milliseconds(_ duration: Duration) -> Int {
            Int(duration.components.seconds) * 1000 + Int(duration.components.attoseconds / 1_000_000_000_000_000)
        }
        return (milliseconds(logTime), milliseconds(snapshotTime), logMegabytes, megabytes(".lz4"))
    }
}

enum DurableLoad {
    struct Figures {
        var perSecond: Int
        var p50Microseconds: Int
        var p99Microseconds: Int
        var perSync: Int

        /// Throughput and per-mutation latency percentiles of one run, and its records per sync.
        init(latencies: [Duration], elapsed: Duration, statistics: WALStatistics) {
            let sorted = latencies.sorted()
            func microseconds(_ duration: Duration) -> Int {
                Int(duration.components.seconds) * 1_000_000 + Int(duration.components.attoseconds / 1_000_000_000_000)
            }
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            self.perSecond = Int(Double(sorted.count) / seconds)
            self.p50Microseconds = microseconds(sorted[sorted.count / 2])
            self.p99Microseconds = microseconds(sorted[min(sorted.count - 1, sorted.count * 99 / 100)])
            self.perSync = statistics.syncs == 0 ? statistics.records : statistics.records / statistics.syncs
        }
    }

    /// `mutations` registrations spread over `callers` threads on a fresh durable engine.
    static func run(durability: Durability, callers: Int, mutations: Int) -> Figures {
        let directory = NSTemporaryDirectory() + "fanout-bench-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let engine = try! Engine(directory: directory, durability: durability)
        let perCaller = max(1, mutations / callers)
        let latencies = LatencyLog(count: callers)
        let group = DispatchGroup()
        let start = ContinuousClock.now
        for caller in 0..<callers {
            group.enter()
            let thread = Thread {
                var local: [Duration] = []
                local.reserveCapacity(perCaller)
                for index in 0..<perCaller {
                    let token = RegistrationToken("bench-\(caller)-\(index):APA91b" + String(repeating: "x", count: 140))!
                    let begin = ContinuousClock.now
                    _ = try! engine.blocking { (changes: inout Engine.Changes) throws(FanoutError) in try changes.register(RegistrationRequest(token: token, platform: .android, appID: AppID("1:1:android:a")!)) }
                    local.append(ContinuousClock.now - begin)
                }
                latencies.store(local, for: caller)
                group.leave()
            }
            thread.stackSize = 1 << 20
            thread.start()
        }
        group.wait()
        let elapsed = ContinuousClock.now - start
        let statistics = engine.logStatistics!
        try! engine.close()
        return Figures(latencies: latencies.all, elapsed: elapsed, statistics: statistics)
    }
}

extension DurableLoad {
    /// `mutations` registrations from `tasks` concurrent tasks, each awaiting `engine.register`,
    /// on a fresh engine with durability `always`.
    static func runTasks(tasks: Int, mutations: Int) async -> Figures {
        let directory = NSTemporaryDirectory() + "fanout-bench-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let engine = try! Engine(directory: directory, durability: .always)
        let perTask = max(1, mutations / tasks)
        let start = ContinuousClock.now
        let all = await withTaskGroup(of: [Duration].self) { group in
            for task in 0..<tasks {
                group.addTask {
                    var local: [Duration] = []
                    local.reserveCapacity(perTask)
                    for index in 0..<perTask {
                        let token = RegistrationToken("bench-\(task)-\(index):APA91b" + String(repeating: "x", count: 140))!
                        let begin = ContinuousClock.now
                        _ = try! await engine.register(RegistrationRequest(token: token, platform: .android, appID: AppID("1:1:android:a")!))
                        local.append(ContinuousClock.now - begin)
                    }
                    return local
                }
            }
            return await group.reduce(into: []) { $0 += $1 }
        }
        let elapsed = ContinuousClock.now - start
        let statistics = engine.logStatistics!
        try! engine.close()
        return Figures(latencies: all, elapsed: elapsed, statistics: statistics)
    }
}

/// Per-thread latency arrays, collected under a lock once each thread is done.
final class LatencyLog: @unchecked Sendable {
    // Safe: `slots` is only touched under `lock`.
    private let lock = NSLock()
    private var slots: [[Duration]]

    init(count: Int) { self.slots = Array(repeating: [], count: count) }

    func store(_ latencies: [Duration], for caller: Int) {
        self.lock.lock()
        self.slots[caller] = latencies
        self.lock.unlock()
    }

    var all: [Duration] {
        self.lock.lock()
        defer { self.lock.unlock() }
        return self.slots.flatMap { $0 }
    }
}
