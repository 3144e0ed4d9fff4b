import FanoutKeys
import FanoutLoad
import Foundation
import Testing

/// Every scenario against a fanoutd the harness starts (port 0, temporary data directory), with
/// small sizes; and `compare` against a Redis it starts, where both systems must find the same
/// audiences for the same sends.
@Suite("Load harness")
struct LoadHarnessTests {
    static func harness(installations: Int = 600, topics: Int = 20, sends: Int = 12) -> LoadHarness {
        var options = LoadOptions()
        options.concurrency = 8
        options.connections = 2
        options.sends = sends
        options.sendConcurrency = 3
        options.consumers = 3
        options.rate = 200
        options.duration = .seconds(1)
        options.latencyRequests = 200
        options.batchConcurrency = 2
        options.idleConnections = 300
        options.tokenSends = 150
        options.quiet = true
        return LoadHarness(workload: LoadWorkload(seed: 3, installations: installations, topics: topics), options: options, durability: "always")
    }

    /// The CPUs this process may run on ("0-1"), from /proc.
    static func allowedCPUs() throws -> String {
        let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("Cpus_allowed_list:") })
        return line.dropFirst("Cpus_allowed_list:".count).trimmingCharacters(in: .whitespaces)
    }

    static func phase(_ report: LoadReport, _ system: String, _ name: String) throws -> PhaseResult {
        try #require(report.phases.first { $0.system == system && $0.phase == name }, "\(system) \(name) ran")
    }

    @Test(arguments: LoadScenario.allCases)
    func everyScenarioRunsAgainstAServerItStarts(scenario: LoadScenario) async throws {
        let harness = Self.harness()
        let cpusBefore = try Self.allowedCPUs()
        let report = try await scenario == .latency ? PinningTurns.shared.taking { try await harness.run(scenario) } : harness.run(scenario)
        if scenario == .connections {
            let held = try #require(report.idleConnections)
            #expect(held.connections == 300)
            #expect(held.residentBytesAfter > 0 && held.residentBytesBefore > 0, "read from /proc before and while they are held")
            #expect(held.freshPingP50Milliseconds > 0 && held.freshPingP50Milliseconds <= held.freshPingP99Milliseconds)
            #expect(report.table.contains("connections: 300 held open"))
            return
        }
        if scenario == .replication {
            // The same registrations on an engine alone, then on a shard owner's engine that
            // publishes each one to JetStream (nats-server's CPU reported as the server's).
            for system in ["engine", "engine+jetstream"] {
                let register = try Self.phase(report, system, "register")
                #expect(register.operations == 600 && register.items == 600 && register.errors.isEmpty, "\(system): \(register.errors)")
            }
            // Read, not more than 0: 600 registrations may take nats-server less than a clock tick.
            #expect(try Self.phase(report, "engine+jetstream", "register").serverCPU != nil, "nats-server's CPU is read from /proc")
            #expect(report.table.contains("engine+jetstream  register"))
            let failover = try Self.phase(report, "engine+jetstream", "failover (3 s lease)")
            #expect(failover.operations == 1 && failover.errors.isEmpty, "node-b took the shard over and answered")
            return
        }
        if scenario == .cluster {
            // The same registrations and subscriptions on one fanoutd, then through a node of three.
            let register = try Self.phase(report, "fanout", "register")
            #expect(register.operations == 600 && register.items == 600 && register.errors.isEmpty, "\(register.errors)")
            let subscribe = try Self.phase(report, "fanout", "subscribe")
            #expect(subscribe.items == harness.workload.subscriptionCount && subscribe.errors.isEmpty, "\(subscribe.errors)")
            // Every request through the cluster is answered; while the whole suite loads both cores,
            // a node's renewal can come later than its lease, and a request for a shard in failover
            // is answered UNAVAILABLE (a subscription batch with such items counts as refused by
            // the harness). Nothing else may fail.
            let clusterRegister = try Self.phase(report, "fanout cluster", "register")
            #expect(clusterRegister.operations + (clusterRegister.errors["UNAVAILABLE"] ?? 0) == 600 && clusterRegister.items == clusterRegister.operations, "\(clusterRegister.errors)")
            #expect(clusterRegister.errors.keys.allSatisfy { $0 == "UNAVAILABLE" }, "\(clusterRegister.errors)")
            let clusterSubscribe = try Self.phase(report, "fanout cluster", "subscribe")
            #expect(clusterSubscribe.operations + clusterSubscribe.errors.values.reduce(0, +) == subscribe.operations, "every batch was answered")
            #expect(clusterSubscribe.errors.keys.allSatisfy { $0 == "UNAVAILABLE" || $0 == "HARNESS" }, "\(clusterSubscribe.errors)")
            #expect(report.table.contains("fanout cluster  register"))
            // Topic sends, their deliveries taken and acknowledged by consumers on one node: on the
            // cluster, from every shard (a send answered UNAVAILABLE may have queued on some shards;
            // it is sent again, as firebase-admin would, up to four times over 7 s: once, under the
            // whole suite's load, a shard stayed between owners through all twelve sends' first tries).
            let sends = try Self.phase(report, "fanout", "send-topic")
            let delivered = try Self.phase(report, "fanout", "send-topic delivered")
            #expect(sends.items > 0 && delivered.items == sends.items)
            #expect(delivered.serverCPU != nil && delivered.harnessCPU != nil, "the delivery phase reports both processes' CPU")
            let clusterSends = try Self.phase(report, "fanout cluster", "send-topic")
            let clusterDelivered = try Self.phase(report, "fanout cluster", "send-topic delivered")
            #expect(clusterSends.errors.keys.allSatisfy { $0 == "UNAVAILABLE" }, "\(clusterSends.errors)")
            // An ACK naming a delivery whose shard changed hands meanwhile is refused UNAVAILABLE
            // (that delivery comes again; the others it named are acknowledged, uncounted here:
            // docs/scale-out.md). The drain ended with nothing pending on any shard either way
            // (else its own error would be among these).
            let refusedAcknowledgements = clusterDelivered.errors["UNAVAILABLE"] ?? 0
            #expect(
                clusterSends.items > 0 && (clusterDelivered.items >= clusterSends.items || refusedAcknowledgements > 0)
                    && clusterDelivered.errors.keys.allSatisfy { $0 == "UNAVAILABLE" },
                "sends \(clusterSends.operations) (\(clusterSends.items) recipients, \(clusterSends.errors)), delivered \(clusterDelivered.items) (\(clusterDelivered.errors))"
            )
            // The followers' lag was sampled, and they caught up once the phases ended.
            let lag = try #require(report.followerLag)
            #expect(lag.samples > 0 && lag.secondsUntilCaughtUp < 60 && Double(lag.maximumMessages) >= lag.meanMaximumMessages)
            #expect(report.table.contains("cluster followers: lag"))
            return
        }
        for phase in report.phases {
            #expect(phase.errors.isEmpty, "\(phase.phase): \(phase.errors)")
            #expect(phase.latency.p50 <= phase.latency.p99 && phase.latency.p99 <= phase.latency.max)
        }
        let register = try Self.phase(report, "fanout", "register")
        #expect(register.operations == 600 && register.items == 600)
        #expect(register.serverResidentBytes ?? 0 > 0, "the server's memory is read from /proc")
        #expect(register.harnessCPU ?? 0 > 0, "the harness's own CPU is read from /proc")
        if scenario.needsSubscriptions {
            let subscribe = try Self.phase(report, "fanout", "subscribe")
            #expect(subscribe.items == harness.workload.subscriptionCount)
        }
        switch scenario {
        case .sendTopic, .sendCondition:
            let name = scenario == .sendTopic ? "send-topic" : "send-condition"
            let sends = try Self.phase(report, "fanout", name)
            let delivered = try Self.phase(report, "fanout", "\(name) delivered")
            #expect(sends.operations == 12)
            #expect(sends.items > 0)
            #expect(delivered.items == sends.items, "every recipient's delivery was taken and acknowledged")
        case .mixed:
            let mixed = try Self.phase(report, "fanout", "mixed")
            #expect(mixed.operations == 200, "rate x duration operations")
        case .recover:
            let recovery = try #require(report.recovery)
            #expect(recovery.installations == 600)
            #expect(recovery.secondsUntilServing >= recovery.secondsUntilListening && recovery.secondsUntilListening > 0)
        case .latency:
            // Then again with the harness and the server on one CPU, and their CPUs given back.
            for name in ["latency ping", "latency read", "latency ping, one CPU", "latency read, one CPU"] {
                let phase = try Self.phase(report, "fanout", name)
                #expect(phase.operations == 200, "\(name): one round trip at a time, each answered")
            }
            #expect(try Self.allowedCPUs() == cpusBefore, "this process runs where it ran before")
        case .registerBatch:
            let batches = try Self.phase(report, "fanout", "register-batch")
            #expect(batches.operations == 1 && batches.items == 600, "600 more installations in one request of 1000 at most")
        case .httpSend:
            for name in ["send-token tcp", "send-token http"] {
                let phase = try Self.phase(report, "fanout", name)
                #expect(phase.operations == 150 && phase.errors.isEmpty, "\(name): every send answered 200 / OK")
            }
        case .register, .subscribe, .connections, .replication, .cluster:
            break
        }
        #expect(report.table.contains("fanout  register"))
        let decoded = try JSONDecoder().decode(LoadReport.self, from: Data(report.json.utf8))
        #expect(decoded.phases.count == report.phases.count)
    }

    /// Either system first (the rounds of `compare --rounds` take turns).
    @Test(arguments: [false, true])
    func compareRunsBothSystemsOnTheSameData(fanoutFirst: Bool) async throws {
        let cpusBefore = try Self.allowedCPUs()
        let report = try await PinningTurns.shared.taking {
            try await Self.harness(installations: 400, topics: 10, sends: 8).compare(fanoutFirst: fanoutFirst)
        }
        for name in [
            "register", "latency ping", "latency read", "latency ping, one CPU", "latency read, one CPU", "subscribe", "send-topic",
            "send-condition", "register-batch",
        ] {
            let fanout = try Self.phase(report, "fanout", name)
            let redis = try Self.phase(report, "redis", name)
            #expect(fanout.errors.isEmpty && redis.errors.isEmpty, "\(name): \(fanout.errors) \(redis.errors)")
            #expect(fanout.operations == redis.operations, "\(name)")
            // Same registrations, same subscriptions, and the same audiences for the same sends:
            // Redis's SMEMBERS / SINTER of SUNIONSTORE count what fanout's index resolves.
            #expect(fanout.items == redis.items, "\(name): fanout \(fanout.items), redis \(redis.items)")
        }
        #expect(Set(report.memory.map(\.system)) == ["fanout", "redis"])
        let ratios = report.comparisons.map(\.figure)
        #expect(ratios.contains("send-topic recipients/s") && ratios.contains("bytes per subscription"))
        #expect(ratios.contains("bytes per installation, RSS against RSS"))
        #expect(report.table.contains("redis (RSS)"))
        #expect(ratios.contains("send-topic delivered deliveries/s (redis: recipients read/s)"))
        #expect(report.comparisons.allSatisfy { $0.ratio > 0 })
        #expect(report.table.contains("fanout/redis"))
        #expect(ratios.contains("latency read, one CPU p50 ms"))
        #expect(try Self.allowedCPUs() == cpusBefore, "this process runs where it ran before")
        // The report names the build it measured.
        let executable = FanoutdProcess.siblingExecutable
        let digest = try #require(FileManager.default.contents(atPath: executable))
        let named = "fanoutd: \(executable) (sha256 \(SHA256.hex(SHA256.hash(digest)).prefix(12)))"
        #expect(report.table.contains(named), "the header says \(named)")
        let first = fanoutFirst ? "fanout" : "redis"
        #expect(report.firstSystems == [first] && report.table.contains("first: \(first) (the system that ran its phases first)"))
    }
}

/// The tests whose runs pin this process to one CPU (the latency phases on one CPU) take turns,
/// so that each can check that the process's CPUs were given back when its run ended.
actor PinningTurns {
    static let shared = PinningTurns()
    private var busy = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    func taking<Result: Sendable>(_ body: @Sendable () async throws -> Result) async throws -> Result {
        if self.busy {
            await withCheckedContinuation { self.waiting.append($0) }
        } else {
            self.busy = true
        }
        defer {
            if self.waiting.isEmpty {
                self.busy = false
            } else {
                self.waiting.removeFirst().resume()
            }
        }
        return try await body()
    }
}
