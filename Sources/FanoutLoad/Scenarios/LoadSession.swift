public import FanoutClient
import FanoutCore
import Foundation

/// One system under load: the backend's connections, the server process to watch (when the
/// harness started it), and the results of the phases run so far.
public final class LoadSession: @unchecked Sendable {
    // Safe to share: `results` and `memoryMarks` change only in `phase` and `markMemory`, which the
    // harness awaits one after another from one task (a phase's own concurrency is inside `body`,
    // which does not touch them); readers look after the phases are done.
    public let backend: any LoadBackend
    public let workload: LoadWorkload
    public let options: LoadOptions
    /// The server's resident memory and CPU time now, when the harness can see its process.
    private let serverResources: @Sendable () -> ProcessResources?
    /// The server's process, when the harness knows it (to pin it for the one-CPU latency phases).
    private let serverProcess: @Sendable () -> Int32?
    /// What the system's data takes now: fanoutd's resident memory, Redis's `used_memory`.
    private let dataMemory: @Sendable () async -> Int?
    public private(set) var results: [PhaseResult] = []
    /// `dataMemory` before and after the register and subscribe phases, by when.
    public private(set) var memoryMarks: [String: Int] = [:]
    /// The server's resident memory at the same moments (Redis's RSS next to its `used_memory`).
    public private(set) var residentMarks: [String: Int] = [:]

    public init(
        backend: any LoadBackend,
        workload: LoadWorkload,
        options: LoadOptions,
        serverResources: @escaping @Sendable () -> ProcessResources?,
        serverProcess: @escaping @Sendable () -> Int32? = { nil },
        dataMemory: @escaping @Sendable () async -> Int?
    ) {
        self.backend = backend
        self.workload = workload
        self.options = options
        self.serverResources = serverResources
        self.serverProcess = serverProcess
        self.dataMemory = dataMemory
    }

    private func markMemory(_ when: String) async {
        if let bytes = await self.dataMemory() {
            self.memoryMarks[when] = bytes
        }
        if let resources = self.serverResources() {
            self.residentMarks[when] = resources.residentBytes
        }
    }

    /// Bytes per installation and per subscription, from the memory marks (when both were taken),
    /// and from the resident marks.
    public var memory: MemoryFigures? {
        guard let data = self.perItem(self.memoryMarks) else { return nil }
        let resident = self.perItem(self.residentMarks)
        return MemoryFigures(
            system: self.backend.system, perInstallation: data.installation, perSubscription: data.subscription,
            total: self.memoryMarks["subscribed"] ?? self.memoryMarks["registered"]!,
            residentPerInstallation: resident?.installation, residentPerSubscription: resident?.subscription
        )
    }

    private func perItem(_ marks: [String: Int]) -> (installation: Double, subscription: Double?)? {
        guard let start = marks["start"], let registered = marks["registered"] else { return nil }
        let subscription = marks["subscribed"].map { Double($0 - registered) / Double(self.workload.subscriptionCount) }
        return (Double(registered - start) / Double(self.workload.installations), subscription)
    }

    var progress: Progress { Progress(quiet: self.options.quiet) }

    /// Runs `body` as a phase and keeps its result: wall time, the server's CPU over it and its
    /// memory after it, and the harness's own CPU (to show the server, not the harness, is what
    /// is measured).
    @discardableResult
    func phase(_ name: String, items: String, _ body: () async throws -> PhaseRecorder) async rethrows -> PhaseResult {
        let before = self.serverResources()
        let harnessBefore = ProcessResources.ofThisProcess()
        let start = ContinuousClock.now
        let recorder = try await body()
        let elapsed = ContinuousClock.now - start
        let after = self.serverResources()
        let harnessAfter = ProcessResources.ofThisProcess()
        let cpu = before.flatMap { before in after.map { $0.cpuSeconds - before.cpuSeconds } }
        let harnessCPU = harnessBefore.flatMap { before in harnessAfter.map { $0.cpuSeconds - before.cpuSeconds } }
        let result = PhaseResult(
            system: self.backend.system, phase: name, itemName: items, recorder: recorder,
            elapsed: elapsed, cpuSeconds: cpu, harnessCPUSeconds: harnessCPU, residentBytes: after?.residentBytes
        )
        self.results.append(result)
        return result
    }

    // MARK: Scenarios

    /// Registers installations `range` (all of them by default).
    public func register(_ range: Range<Int>? = nil) async {
        let range = range ?? 0..<self.workload.installations
        let backend = self.backend
        await self.markMemory("start")
        await self.phase("register", items: "registrations") {
            await LoadRunner.closedLoop("register", count: range.count, concurrency: self.options.concurrency, progress: self.progress) { index, worker in
                try await backend.register(range.lowerBound + index, worker: worker)
                return 1
            }
        }
        await self.markMemory("registered")
    }

    /// Registers the workload's `batchInstallations` (as many again, past its own), 1000 per
    /// request, `batchConcurrency` requests in flight, the requests prepared before the phase
    /// (`LoadBackend.registrationBatchCalls`). Each request must register all of its items.
    public func registerBatches() async {
        let range = self.workload.batchInstallations
        let batches = stride(from: range.lowerBound, to: range.upperBound, by: 1000).map { $0..<min(range.upperBound, $0 + 1000) }
        let calls = self.backend.registrationBatchCalls(batches)
        await self.phase("register-batch", items: "registrations") {
            await LoadRunner.closedLoop("register-batch", count: batches.count, concurrency: self.options.batchConcurrency, progress: self.progress) { index, worker in
                let (registered, asked) = (try await calls[index](worker), batches[index].count)
                guard registered == asked else {
                    throw LoadError("\(asked - registered) of \(asked) registrations refused")
                }
                return registered
            }
        }
    }

    /// The latency phases of several systems, taking turns: blocks of `turn` round trips, each
    /// system's block after the other's, PINGs first and then reads, so that every system is
    /// measured in the same minutes (this VM's speed drifts by tens of percent within minutes).
    /// Each system gets its `latency ping` and `latency read` phases, with the server's and the
    /// harness's CPU summed over its own blocks. Then, when the harness can pin every server's
    /// process, the same again with the harness and the servers on one CPU (`latency ping, one
    /// CPU` and `latency read, one CPU`; `CPUPinning` says why).
    static func latencyInTurns(_ sessions: [LoadSession], turn: Int = 1000) async {
        await Self.latencyInTurns(sessions, turn: turn, suffix: "")
        let servers = sessions.compactMap { $0.serverProcess() }
        guard servers.count == sessions.count, let pinning = CPUPinning.pin(servers: servers) else { return }
        await Self.latencyInTurns(sessions, turn: turn, suffix: ", one CPU")
        pinning.restore()
    }

    private static func latencyInTurns(_ sessions: [LoadSession], turn: Int, suffix: String) async {
        for (name, read) in [("latency ping" + suffix, false), ("latency read" + suffix, true)] {
            var recorders = Array(repeating: PhaseRecorder(), count: sessions.count)
            var elapsed = Array(repeating: Duration.zero, count: sessions.count)
            var serverCPU = Array(repeating: 0.0, count: sessions.count)
            var harnessCPU = Array(repeating: 0.0, count: sessions.count)
            let requests = sessions.first?.options.latencyRequests ?? 0
            var done = 0
            while done < requests {
                let count = min(turn, requests - done)
                for (index, session) in sessions.enumerated() {
                    let backend = session.backend
                    let installations = session.workload.installations
                    let first = done
                    let server = session.serverResources()
                    let harness = ProcessResources.ofThisProcess()
                    let start = ContinuousClock.now
                    let block = await LoadRunner.closedLoop(name, count: count, concurrency: 1, progress: session.progress) { offset, _ in
                        if read {
                            try await backend.readInstallation(((first + offset) &* 7919) % installations, worker: 0)
                        } else {
                            try await backend.ping(worker: 0)
                        }
                        return 1
                    }
                    elapsed[index] += ContinuousClock.now - start
                    if let before = server, let after = session.serverResources() { serverCPU[index] += after.cpuSeconds - before.cpuSeconds }
                    if let before = harness, let after = ProcessResources.ofThisProcess() { harnessCPU[index] += after.cpuSeconds - before.cpuSeconds }
                    recorders[index].merge(block)
                }
                done += count
            }
            for (index, session) in sessions.enumerated() {
                session.results.append(PhaseResult(
                    system: session.backend.system, phase: name, itemName: "round trips", recorder: recorders[index],
                    elapsed: elapsed[index], cpuSeconds: serverCPU[index], harnessCPUSeconds: harnessCPU[index],
                    residentBytes: session.serverResources()?.residentBytes
                ))
            }
        }
    }

    /// Round trips one at a time on one connection, from the same client loop on either system:
    /// `latency ping` (PING), then `latency read` (one installation by its token; Redis: HGET).
    /// Needs the installations registered. (`latencyInTurns` with this system alone.)
    public func latency() async {
        await Self.latencyInTurns([self], turn: self.options.latencyRequests)
    }

    /// Subscribes every topic's installations, 1000 per call.
    public func subscribe() async {
        let batches = self.workload.subscriptionBatches(size: 1000)
        let calls = self.backend.subscriptionCalls(batches.map { (self.workload.topicName($0.rank), $0.members) })
        await self.phase("subscribe", items: "subscriptions") {
            await LoadRunner.closedLoop("subscribe", count: batches.count, concurrency: self.options.concurrency, progress: self.progress) { index, worker in
                let (subscribed, asked) = (try await calls[index](worker), batches[index].members.count)
                guard subscribed == asked else {
                    throw LoadError("\(asked - subscribed) of \(asked) subscriptions refused")
                }
                return subscribed
            }
        }
        await self.markMemory("subscribed")
    }

    /// `sends` sends to topics (popular ones most often), or to conditions; the items are the
    /// recipients each reached. A send answered `UNAVAILABLE` (a cluster's shard between owners) is
    /// sent again as firebase-admin would (`UnavailableRetries.firebaseAdmin`); a cluster may then
    /// queue it twice on the shards that took it the first time, as FCM's at-least-once allows.
    public func send(conditions: Bool, drain: DeliveryDrainTarget?) async throws {
        let backend = self.backend
        let workload = self.workload
        let name = conditions ? "send-condition" : "send-topic"
        let sends = self.options.sends
        let concurrency = self.options.sendConcurrency
        let send: @Sendable (Int, Int) async throws -> Int = { index, worker in
            conditions
                ? try await backend.sendToCondition(workload.condition(index), worker: worker)
                : try await backend.sendToTopic(workload.topicName(workload.sendRank(index)), worker: worker)
        }
        guard let drain else {
            await self.phase(name, items: "recipients") {
                await LoadRunner.closedLoop(name, count: sends, concurrency: concurrency, progress: self.progress, retries: .firebaseAdmin, operation: send)
            }
            return
        }
        // fanout: consumers take and acknowledge every delivery while the sends go on; the
        // delivery phase lasts from the first send until nothing is pending.
        let consumers = try await DeliveryDrain.attach(
            count: self.options.consumers, host: drain.host, port: drain.port, adminKey: drain.adminKey, consumerKey: drain.consumerKey, tls: drain.tls
        )
        let before = self.serverResources()
        let harnessBefore = ProcessResources.ofThisProcess()
        let start = ContinuousClock.now
        async let delivered = consumers.run()
        await self.phase(name, items: "recipients") {
            await LoadRunner.closedLoop(name, count: sends, concurrency: concurrency, progress: self.progress, retries: .firebaseAdmin, operation: send)
        }
        var drainError: (any Error)?
        do {
            try await consumers.waitUntilDrained(timeout: .seconds(600))
        } catch {
            drainError = error
        }
        let elapsed = ContinuousClock.now - start
        let after = self.serverResources()
        let harnessAfter = ProcessResources.ofThisProcess()
        await consumers.detach()
        var recorder = await delivered
        await consumers.close()
        if let drainError {
            recorder.record(.zero, error: drainError)
        }
        let result = PhaseResult(
            system: self.backend.system, phase: "\(name) delivered", itemName: "deliveries", recorder: recorder,
            elapsed: elapsed,
            cpuSeconds: before.flatMap { before in after.map { $0.cpuSeconds - before.cpuSeconds } },
            harnessCPUSeconds: harnessBefore.flatMap { before in harnessAfter.map { $0.cpuSeconds - before.cpuSeconds } },
            residentBytes: after?.residentBytes
        )
        self.results.append(result)
    }

    /// Registrations, token refreshes, subscriptions and sends together, open loop at `rate`
    /// operations per second: 30% register new installations, 20% refresh the token of one
    /// registered 1000 operations earlier (before that, they register too), 40% subscribe ten
    /// installations to a topic, 10% send to one of the 90% least popular topics.
    public func mixed() async {
        let backend = self.backend
        let workload = self.workload
        let base = workload.installations
        let head = workload.topics / 10
        await self.phase("mixed", items: "operations") {
            await LoadRunner.openLoop("mixed", rate: self.options.rate, duration: self.options.duration, progress: self.progress) { index in
                let worker = index
                let decade = index / 10
                switch index % 10 {
                case 0, 3, 6:
                    try await backend.register(base + index, worker: worker)
                case 1, 8:
                    if decade < 100 {
                        try await backend.register(base + index, worker: worker)
                    } else {
                        try await backend.refreshToken(base + (decade - 100) * 10, generation: index % 10 == 1 ? 1 : 2, worker: worker)
                    }
                case 2, 4, 7, 9:
                    let rank = 1 + decade % workload.topics
                    let members = (0..<10).map { (index &* 7919 &+ $0 &* 104_729) % base }
                    _ = try await backend.subscribe(members[...], to: workload.topicName(rank), worker: worker)
                default:
                    let rank = head + 1 + (decade &* 31) % (workload.topics - head)
                    _ = try await backend.sendToTopic(workload.topicName(rank), worker: worker)
                }
                return 1
            }
        }
    }
}

/// What a system's data takes in memory: as the system counts it (fanoutd's RSS, Redis's
/// `used_memory`), and as the server process's resident memory.
public struct MemoryFigures: Codable, Sendable {
    public var system: String
    public var perInstallation: Double
    public var perSubscription: Double?
    /// After the last phase measured, bytes.
    public var total: Int
    /// From the process's resident memory, when the harness can see the process.
    public var residentPerInstallation: Double?
    public var residentPerSubscription: Double?
    /// The round it was measured in, with `compare --rounds N` (N > 1).
    public var round: Int?
}

/// Where the consumers of a fanout send connect.
public struct DeliveryDrainTarget: Sendable {
    public var host: String
    public var port: Int
    public var adminKey: String
    public var consumerKey: String
    public var tls: FanoutClient.TLS? = nil

    public init(host: String, port: Int, adminKey: String, consumerKey: String) {
        self.host = host
        self.port = port
        self.adminKey = adminKey
        self.consumerKey = consumerKey
    }
}
