import FanoutClient
import FanoutCluster
import FanoutCore
import FanoutKeys
import FanoutTestSupport
import Foundation

/// Runs scenarios against fanoutd (started here, or already running) and, for `compare`, against
/// a Redis started here with the same data, one system after the other.
public struct LoadHarness: Sendable {
    public var workload: LoadWorkload
    public var options: LoadOptions
    /// `always`, `interval:MS` or `none`: fanoutd's `--durability`, and Redis's `appendfsync`
    /// to match.
    public var durability: String
    public var fanoutd: String

    public init(workload: LoadWorkload, options: LoadOptions, durability: String, fanoutd: String = FanoutdProcess.siblingExecutable) {
        self.workload = workload
        self.options = options
        self.durability = durability
        self.fanoutd = fanoutd
    }

    /// Where a running fanoutd is, for runs against it.
    public struct RunningServer: Sendable {
        public var host: String
        public var port: Int
        public var adminKey: String
        /// Needed to drain deliveries in the send scenarios.
        public var consumerKey: String?
        /// Its process id, to report its memory and CPU.
        public var pid: Int32?

        public init(host: String, port: Int, adminKey: String, consumerKey: String?, pid: Int32?) {
            self.host = host
            self.port = port
            self.adminKey = adminKey
            self.consumerKey = consumerKey
            self.pid = pid
        }
    }

    /// Runs the scenario against fanoutd: the one given, or one started on a temporary data
    /// directory (removed afterwards).
    public func run(_ scenario: LoadScenario, against running: RunningServer? = nil) async throws -> LoadReport {
        var report = LoadReport(workload: self.workload, durability: self.durability, options: self.options)
        if scenario == .replication {
            guard running == nil else { throw LoadError("replication runs engines in the harness (leave out --server)") }
            try await self.replication(into: &report)
            return report
        }
        if scenario == .cluster {
            guard running == nil else { throw LoadError("cluster starts its fanoutd processes (leave out --server)") }
            try await self.cluster(into: &report)
            return report
        }
        if let running {
            guard scenario != .recover, scenario != .httpSend else {
                throw LoadError("\(scenario.rawValue) needs a server the harness starts (leave out --server)")
            }
            let pid = running.pid
            if scenario == .connections {
                report.idleConnections = try await IdleConnections.hold(
                    self.options.idleConnections, concurrency: 64, host: running.host, port: running.port, apiKey: running.adminKey,
                    serverResources: { pid.flatMap { ProcessResources.of(pid: $0) } }
                )
                return report
            }
            let session = try await self.fanoutSession(
                host: running.host, port: running.port, adminKey: running.adminKey,
                resources: { pid.flatMap { ProcessResources.of(pid: $0) } }, process: { pid }
            )
            let drain = running.consumerKey.map { DeliveryDrainTarget(host: running.host, port: running.port, adminKey: running.adminKey, consumerKey: $0) }
            try await self.run(scenario, on: session, drain: drain, report: &report)
            await session.backend.close()
            report.add(session)
            return report
        }
        let directory = TemporaryDirectory.path("fanout-load")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let server = try FanoutdProcess(
            executable: self.fanoutd, dataDirectory: directory, durability: self.durability, tls: self.options.tls, http: scenario == .httpSend
        )
        report.fanoutd = Self.identify(self.fanoutd)
        if scenario == .connections {
            // Before the server starts: it inherits the limit on open files.
            try IdleConnections.raiseOpenFileLimit(to: self.options.idleConnections + 1024)
            try await server.start()
            report.idleConnections = try await IdleConnections.hold(
                self.options.idleConnections, concurrency: 64, host: "127.0.0.1", port: server.port, apiKey: server.adminKey,
                tls: server.clientTLS, devices: self.options.devices, serverResources: { server.resources }
            )
            server.stop()
            return report
        }
        try await server.start()
        let session = try await self.fanoutSession(
            host: "127.0.0.1", port: server.port, adminKey: server.adminKey, tls: server.clientTLS, resources: { server.resources },
            process: { server.pid }
        )
        var drain = DeliveryDrainTarget(host: "127.0.0.1", port: server.port, adminKey: server.adminKey, consumerKey: server.consumerKey)
        drain.tls = server.clientTLS
        let http = server.httpPort.map { HTTPFrontTarget(host: "127.0.0.1", port: $0, apiKey: server.adminKey) }
        try await self.run(scenario, on: session, drain: drain, http: http, report: &report)
        await session.backend.close()
        report.add(session)
        if scenario == .recover {
            report.recovery = try await self.recover(server)
        }
        server.stop()
        return report
    }

    /// The same register, subscribe, send-topic, send-condition and register-batch phases against
    /// Redis and fanoutd, both started here, one system after the other (Redis first unless
    /// `fanoutFirst`; the other idles), with the ratios of their figures. Then the latency phases,
    /// with the two systems taking turns in short blocks (Redis idle while fanoutd runs and the
    /// other way round), so that both are measured in the same minutes of the machine.
    public func compare(fanoutFirst: Bool = false) async throws -> LoadReport {
        var report = LoadReport(workload: self.workload, durability: self.durability, options: self.options)
        report.firstSystems = [fanoutFirst ? "fanout" : "redis"]
        let directory = TemporaryDirectory.path("fanout-load-compare")
        defer { try? FileManager.default.removeItem(atPath: directory) }

        let redis = try RedisProcess(directory: directory + "/redis")
        try await redis.start(appendFsync: RedisProcess.appendFsync(matching: self.durability))
        let redisBackend = try await RedisBackend.connect(workload: self.workload, host: "127.0.0.1", port: redis.port, connections: self.options.connections)
        let probe = try await RedisConnection.connect(host: "127.0.0.1", port: redis.port)
        let redisSession = LoadSession(
            backend: redisBackend, workload: self.workload, options: self.options,
            serverResources: { redis.resources },
            serverProcess: { redis.pid },
            dataMemory: { try? await RedisProcess.usedMemory(probe) }
        )

        let server = try FanoutdProcess(executable: self.fanoutd, dataDirectory: directory + "/fanout", durability: self.durability)
        report.fanoutd = Self.identify(self.fanoutd)
        try await server.start()
        let fanoutSession = try await self.fanoutSession(
            host: "127.0.0.1", port: server.port, adminKey: server.adminKey, resources: { server.resources }, process: { server.pid }
        )
        let drain = DeliveryDrainTarget(host: "127.0.0.1", port: server.port, adminKey: server.adminKey, consumerKey: server.consumerKey)
        if fanoutFirst {
            try await self.runComparedPhases(on: fanoutSession, drain: drain)
            try await self.runComparedPhases(on: redisSession, drain: nil)
        } else {
            try await self.runComparedPhases(on: redisSession, drain: nil)
            try await self.runComparedPhases(on: fanoutSession, drain: drain)
        }
        await LoadSession.latencyInTurns([redisSession, fanoutSession])
        await redisBackend.close()
        try? await probe.close()
        await redis.stop()
        report.add(redisSession)
        await fanoutSession.backend.close()
        server.stop()
        report.add(fanoutSession)
        report.compare()
        return report
    }

    /// `executable`'s path and the first 12 hex digits of its SHA-256 (what a report names the
    /// measured build by: compare it with `sha256sum` of a clean build).
    static func identify(_ executable: String) -> String {
        guard let contents = FileManager.default.contents(atPath: executable) else { return "\(executable) (unreadable)" }
        return "\(executable) (sha256 \(SHA256.hex(SHA256.hash(contents)).prefix(12)))"
    }

    private func runComparedPhases(on session: LoadSession, drain: DeliveryDrainTarget?) async throws {
        await session.register()
        await session.subscribe()
        try await session.send(conditions: false, drain: drain)
        try await session.send(conditions: true, drain: drain)
        await session.registerBatches()
    }

    private func run(
        _ scenario: LoadScenario,
        on session: LoadSession,
        drain: DeliveryDrainTarget?,
        http: HTTPFrontTarget? = nil,
        report: inout LoadReport
    ) async throws {
        await session.register()
        if scenario.needsSubscriptions {
            await session.subscribe()
        }
        switch scenario {
        case .register, .subscribe, .recover:
            break
        case .latency:
            await session.latency()
        case .registerBatch:
            await session.registerBatches()
        case .connections, .replication, .cluster:
            break  // run before any session
        case .httpSend:
            guard let http else { throw LoadError("http-send needs fanoutd's HTTP front") }
            try await session.sendToTokens(http: http)
        case .sendTopic:
            try await session.send(conditions: false, drain: drain)
        case .sendCondition:
            try await session.send(conditions: true, drain: drain)
        case .mixed:
            await session.mixed()
        }
    }

    private func fanoutSession(
        host: String, port: Int, adminKey: String, tls: FanoutClient.TLS? = nil,
        resources: @escaping @Sendable () -> ProcessResources?,
        process: @escaping @Sendable () -> Int32? = { nil }
    ) async throws -> LoadSession {
        let backend = try await FanoutBackend.connect(
            workload: self.workload, host: host, port: port, apiKey: adminKey, connections: self.options.connections, tls: tls,
            batchReplies: self.options.batchReplies
        )
        return LoadSession(
            backend: backend, workload: self.workload, options: self.options,
            serverResources: resources,
            serverProcess: process,
            dataMemory: { resources()?.residentBytes }
        )
    }

    /// The register phase on an engine in this process on its data directory (system `engine`),
    /// then on a shard owner's engine whose changes are answered once JetStream holds them too
    /// (`engine+jetstream`: one stream, one replica, a nats-server started here, its CPU reported
    /// as the server's). The same workload, workers and durability; no network between the
    /// workers and the engine, so the difference is replication's.
    private func replication(into report: inout LoadReport) async throws {
        let directory = TemporaryDirectory.path("fanout-load-replication")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        guard let durability = Durability(parsing: self.durability) else {
            throw LoadError("--durability \(self.durability) is not always, interval:MS or none")
        }
        var configuration = EngineConfiguration()
        configuration.sendQuota = .unlimited

        let alone = try Engine(directory: directory + "/alone", durability: durability, configuration: configuration)
        let aloneSession = LoadSession(
            backend: EngineBackend(system: "engine", engine: alone, workload: self.workload), workload: self.workload, options: self.options,
            serverResources: { nil }, dataMemory: { nil }
        )
        await aloneSession.register()
        await aloneSession.backend.close()
        report.add(aloneSession)

        guard let executable = NATSServerProcess.installedExecutable else {
            throw LoadError("nats-server is not installed (apt: nats-server; `make deps` installs it)")
        }
        let nats = try NATSServerProcess(executable: executable, directory: directory + "/nats")
        try await nats.start(timeout: .seconds(60))
        defer { nats.kill() }
        let jetStream = try JetStream(urls: nats.url)
        let stream = ShardStream(shard: 0)
        try stream.create(on: jetStream, replicas: 1)
        let owner = try Engine.shardOwner(
            directory: directory + "/owner", durability: durability, configuration: configuration,
            publisher: ShardPublisher(jetStream, stream: stream, term: "fanout-load.1")
        )
        let replicatedSession = LoadSession(
            backend: EngineBackend(system: "engine+jetstream", engine: owner, workload: self.workload), workload: self.workload, options: self.options,
            serverResources: { nats.pid.flatMap { ProcessResources.of(pid: $0) } }, dataMemory: { nil }
        )
        await replicatedSession.register()
        await replicatedSession.backend.close()
        report.add(replicatedSession)
        report.phases.append(try await self.failover(jetStream: jetStream, directory: directory))
    }

    /// The register, subscribe and send-topic phases (consumers draining the deliveries) on one
    /// fanoutd (system `fanout`), then through node-1 of a three-node cluster (`fanout cluster`:
    /// 16 shards, a 3 s lease, one nats-server, one replica; the consumers attached to node-1, so
    /// that two thirds of the deliveries come from the other nodes), every process started here on
    /// this machine. The server's CPU and memory reported
    /// for the cluster are node-1's alone.
    private func cluster(into report: inout LoadReport) async throws {
        let directory = TemporaryDirectory.path("fanout-load-cluster")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)

        let single = try FanoutdProcess(executable: self.fanoutd, dataDirectory: directory + "/single", durability: self.durability)
        try await single.start()
        let singleSession = try await self.fanoutSession(host: "127.0.0.1", port: single.port, adminKey: single.adminKey, resources: { single.resources })
        await singleSession.register()
        await singleSession.subscribe()
        try await singleSession.send(conditions: false, drain: DeliveryDrainTarget(host: "127.0.0.1", port: single.port, adminKey: single.adminKey, consumerKey: single.consumerKey))
        await singleSession.backend.close()
        single.stop()
        report.add(singleSession)

        guard let executable = NATSServerProcess.installedExecutable else {
            throw LoadError("nats-server is not installed (apt: nats-server; `make deps` installs it)")
        }
        let nats = try NATSServerProcess(executable: executable, directory: directory + "/nats")
        try await nats.start(timeout: .seconds(60))
        defer { nats.kill() }
        var nodes: [FanoutdProcess] = []
        defer { nodes.forEach { $0.stop() } }
        for index in 1...3 {
            let node = try FanoutdProcess(executable: self.fanoutd, dataDirectory: "\(directory)/node-\(index)", durability: self.durability, keysOf: nodes.first)
            node.extraArguments = Self.clusterArguments(nats.url, node: index, snapshotEvery: self.options.nodeSnapshotEvery)
            try await node.start()
            nodes.append(node)
        }
        // Until each node owns the shards placed on it, so no hand-over falls inside the phases.
        let deadline = ContinuousClock.now + .seconds(120)
        while true {
            let status = try ClusterStatus.read(urls: nats.url)
            if status.nodes.count == 3, status.isSettled { break }
            guard ContinuousClock.now < deadline else { throw LoadError("the cluster did not settle in 120 s:\n\(status.table)") }
            try await Task.sleep(for: .milliseconds(200))
        }
        let first = nodes[0]
        let backend = try await FanoutBackend.connect(
            workload: self.workload, host: "127.0.0.1", port: first.port, apiKey: first.adminKey, connections: self.options.connections, system: "fanout cluster",
            batchReplies: self.options.batchReplies
        )
        let clusterSession = LoadSession(
            backend: backend, workload: self.workload, options: self.options, serverResources: { first.resources }, dataMemory: { first.resources?.residentBytes }
        )
        // The followers' lag, sampled while the phases run, then until they caught up.
        let sampler = Task { () -> [UInt64] in
            var maxima: [UInt64] = []
            while !Task.isCancelled {
                if let status = try? ClusterStatus.read(urls: nats.url) { maxima.append(status.maximumLag) }
                try? await Task.sleep(for: .milliseconds(250))
            }
            return maxima
        }
        await clusterSession.register()
        await clusterSession.subscribe()
        // Sends through node-1, drained by consumers all attached to node-1: the deliveries of the
        // shards other nodes own come through their ShardConsumers.
        try await clusterSession.send(conditions: false, drain: DeliveryDrainTarget(host: "127.0.0.1", port: first.port, adminKey: first.adminKey, consumerKey: first.consumerKey))
        sampler.cancel()
        let maxima = await sampler.value
        let ended = ContinuousClock.now
        while ContinuousClock.now - ended < .seconds(60), (try? ClusterStatus.read(urls: nats.url).maximumLag) != 0 {
            try await Task.sleep(for: .milliseconds(100))
        }
        let caughtUp = ContinuousClock.now - ended
        await clusterSession.backend.close()
        report.add(clusterSession)
        report.followerLag = FollowerLagFigures(
            samples: maxima.count,
            maximumMessages: maxima.max() ?? 0,
            meanMaximumMessages: maxima.isEmpty ? 0 : Double(maxima.reduce(0, +)) / Double(maxima.count),
            secondsUntilCaughtUp: caughtUp / .seconds(1)
        )

        // A fourth node joins on a fresh directory: from the published snapshots and the streams
        // after them (or, without snapshots, the whole streams).
        let joined = try ClusterStatus.read(urls: nats.url)
        let fourth = try FanoutdProcess(executable: self.fanoutd, dataDirectory: "\(directory)/node-4", durability: self.durability, keysOf: first)
        fourth.extraArguments = Self.clusterArguments(nats.url, node: 4, snapshotEvery: self.options.nodeSnapshotEvery)
        let joinStarted = ContinuousClock.now
        try await fourth.start()
        nodes.append(fourth)
        func follows(_ status: ClusterStatus) -> Bool {
            status.shards.allSatisfy { $0.applied["node-4"] != nil && ($0.lag(of: "node-4") ?? 0) == 0 }
        }
        while ContinuousClock.now - joinStarted < .seconds(300), !((try? ClusterStatus.read(urls: nats.url)).map(follows) ?? false) {
            try await Task.sleep(for: .milliseconds(100))
        }
        report.clusterJoin = ClusterJoinFigures(
            snapshotEverySeconds: self.options.nodeSnapshotEvery,
            secondsUntilFollowing: (ContinuousClock.now - joinStarted) / .seconds(1),
            streamMessagesHeld: joined.shards.reduce(0) { $0 + $1.streamEnd + 1 - min($1.streamStart, $1.streamEnd + 1) },
            streamMessagesWritten: joined.shards.reduce(0) { $0 + $1.streamEnd },
            publishedSnapshots: joined.shards.filter { $0.snapshotLSN != nil }.count
        )
    }

    /// A cluster node's options: 16 shards, a 3 s lease, the nodes' snapshot interval.
    private static func clusterArguments(_ urls: String, node: Int, snapshotEvery: Int) -> [String] {
        ["--cluster", urls, "--node", "node-\(node)", "--shards", "16", "--lease", "3", "--snapshot-every", "\(snapshotEvery)"]
    }

    /// The failover time: two `ShardNode`s on their own directories (a 3 s lease, a turn every
    /// second, as a node takes them); A takes a fresh shard and answers a change, B follows; then
    /// A stops taking turns, as if killed. Measured: from A's last renewal until B, having taken
    /// the lapsed lease, answers a change of its own.
    private func failover(jetStream: JetStream, directory: String) async throws -> PhaseResult {
        let lease = Duration.seconds(3), turn = Duration.seconds(1)
        let stream = ShardStream(shard: 1)
        try stream.create(on: jetStream, replicas: 1)
        let ownership = try ShardOwnership(jetStream, lease: lease)
        let a = try ShardNode(node: "node-a", stream: stream, directory: directory + "/node-a", jetStream: jetStream, ownership: ownership)
        let b = try ShardNode(node: "node-b", stream: stream, directory: directory + "/node-b", jetStream: jetStream, ownership: ownership)
        try a.step()
        guard case .owning = a.role else { throw LoadError("node-a did not take the free shard") }
        let backendA = EngineBackend(system: "node-a", engine: a.engine, workload: self.workload)
        try await backendA.register(0, worker: 0)
        try b.step()
        try a.step()  // its last renewal
        let stopped = ContinuousClock.now
        let start = ContinuousClock.now
        while ContinuousClock.now - start < .seconds(60) {
            try await Task.sleep(for: turn)
            try? b.step()
            if case .owning = b.role { break }
        }
        guard case .owning = b.role else { throw LoadError("node-b did not take the shard within 60 s") }
        try await EngineBackend(system: "node-b", engine: b.engine, workload: self.workload).register(1, worker: 0)
        let failover = ContinuousClock.now - stopped
        try? a.engine.close()
        try? b.engine.close()
        var recorder = PhaseRecorder()
        recorder.record(failover)
        return PhaseResult(
            system: "engine+jetstream", phase: "failover (3 s lease)", itemName: "failovers", recorder: recorder,
            elapsed: failover, cpuSeconds: nil, residentBytes: nil
        )
    }

    /// SIGKILL, start again on the same directory, and time until the server answers PING with
    /// every installation there.
    private func recover(_ server: FanoutdProcess) async throws -> RecoveryFigures {
        server.kill()
        let start = ContinuousClock.now
        let listening = try await server.start()
        let client = try await FanoutClient.connect(host: "127.0.0.1", port: server.port, apiKey: server.adminKey, tls: server.clientTLS, clientName: "fanout-load")
        try await client.ping()
        let serving = ContinuousClock.now - start
        let installations = try await client.installationCount()
        try? await client.close()
        guard installations == self.workload.installations else {
            throw LoadError("after the restart the server holds \(installations) installations, not \(self.workload.installations)")
        }
        return RecoveryFigures(
            secondsUntilListening: listening / .seconds(1),
            secondsUntilServing: serving / .seconds(1),
            installations: installations,
            subscriptions: self.workload.subscriptionCount,
            residentBytes: server.resources?.residentBytes
        )
    }
}
