@preconcurrency import Benchmark
import BenchmarkSupport
import FanoutClient
import FanoutCore
import FanoutKeys
import FanoutServer
import FanoutWire
import Foundation
import Synchronization

// fanoutd's protocol over loopback with the real client, server and client in this process, the
// engine on a temporary directory with durability `always` (every reply after its fdatasync):
// - pipelined batch subscribe: batches of 1000 registrations, 16 batches in flight on one connection;
// - single-request latency: one request at a time (a read, and a durable write);
// - fan-out: a send to a topic of 10k installations, drained by 1, 10 or 100 consumer connections
//   (platform workers sharing the deliveries), acknowledging each delivery with its own ACK
//   (pipelined), or what has arrived with one ACK per batch (`nextBatch`).

let benchmarks: @Sendable () -> Void = {
    let throughput: [BenchmarkMetric] = [
        .custom("per second", polarity: .prefersLarger, useScalingFactor: false),
    ]

    Benchmark(
        "Protocol.subscribe.pipelined.batch1000",
        configuration: .init(metrics: throughput, warmupIterations: 1, maxDuration: .seconds(20), maxIterations: 5)
    ) { benchmark async in
        await ProtocolLoad.report(benchmark) {
            let perSecond = try await ProtocolLoad.withServer(installations: 100_000) { server, client in
                try await ProtocolLoad.subscribeAll(client, count: 100_000, topic: "news", window: 16)
            }
            benchmark.measurement(throughput[0], perSecond)
        }
    }

    // One request at a time: a read, and a change that waits for its fdatasync.
    let latencies: [(name: String, iterations: Int, call: @Sendable (FanoutClient, String) async throws -> Installation)] = [
        ("getInstallation", 20_000, { try await $0.installation($1) }),
        ("touch.durable", 5_000, { try await $0.touch($1) }),
    ]
    for (name, iterations, call) in latencies {
        Benchmark(
            "Protocol.latency.\(name)",
            configuration: .init(metrics: [.wallClock], scalingFactor: .one, maxDuration: .seconds(5), maxIterations: iterations)
        ) { benchmark async in
            await ProtocolLoad.report(benchmark) {
                try await ProtocolLoad.withServer(installations: 1) { _, client in
                    let token = Fixtures.token(0)
                    benchmark.startMeasurement()
                    for _ in benchmark.scaledIterations {
                        blackHole(try await call(client, token))
                    }
                    benchmark.stopMeasurement()
                }
            }
        }
    }

    // Installation auth tokens: signing one, verifying one (what HELLO does before it asks the
    // engine whether the installation still has those credentials).
    Benchmark(
        "Credentials.authToken.issue",
        configuration: .init(metrics: [.wallClock], scalingFactor: .one, maxDuration: .seconds(5), maxIterations: 20_000)
    ) { benchmark in
        await ProtocolLoad.report(benchmark) {
            try ProtocolLoad.withTokens { tokens in
                benchmark.startMeasurement()
                for _ in benchmark.scaledIterations {
                    blackHole(try tokens.issue(project: "default", appID: "1:1:android:a", fid: "eWkQ0JhLD2hnwthI-tkvWz", credentialID: "AAAAAAAAAAAAAAAA", now: ProtocolLoad.now))
                }
                benchmark.stopMeasurement()
            }
        }
    }
    Benchmark(
        "Credentials.authToken.verify",
        configuration: .init(metrics: [.wallClock], scalingFactor: .one, maxDuration: .seconds(5), maxIterations: 20_000)
    ) { benchmark in
        await ProtocolLoad.report(benchmark) {
            try ProtocolLoad.withTokens { tokens in
                let token = Array(try tokens.issue(project: "default", appID: "1:1:android:a", fid: "eWkQ0JhLD2hnwthI-tkvWz", credentialID: "AAAAAAAAAAAAAAAA", now: ProtocolLoad.now).token.utf8)
                benchmark.startMeasurement()
                for _ in benchmark.scaledIterations {
                    blackHole(try tokens.verify(token, now: ProtocolLoad.now))
                }
                benchmark.stopMeasurement()
            }
        }
    }

    // A new connection and its HELLO, with an API key and with an installation's auth token.
    for device in [false, true] {
        Benchmark(
            "Protocol.connectAndHello.\(device ? "authToken" : "apiKey")",
            configuration: .init(metrics: [.wallClock], scalingFactor: .one, maxDuration: .seconds(5), maxIterations: 2_000)
        ) { benchmark async in
            await ProtocolLoad.report(benchmark) {
                try await ProtocolLoad.withServer(installations: 1) { server, admin in
                    let credential: Hello.Credential
                    if device {
                        let credentials = try await admin.issueCredentials(for: Fixtures.token(0))
                        credential = .installationAuthToken(Array(credentials.authToken.token.utf8))
                    } else {
                        credential = .apiKey(Array(ProtocolLoad.key.utf8))
                    }
                    benchmark.startMeasurement()
                    for _ in benchmark.scaledIterations {
                        let client = try await FanoutClient.connect(host: "127.0.0.1", port: server.localPort, credential: credential, role: device ? .device : .admin)
                        try await client.close()
                    }
                    benchmark.stopMeasurement()
                }
            }
        }
    }

    for consumers in [1, 10, 100] {
        for batched in [false, true] {
        Benchmark(
            "Protocol.fanout.10k.consumers\(consumers).\(batched ? "ackBatches" : "ackEach")",
            configuration: .init(metrics: throughput, warmupIterations: 1, maxDuration: .seconds(20), maxIterations: 5)
        ) { benchmark async in
            await ProtocolLoad.report(benchmark) {
                let perSecond = try await ProtocolLoad.withServer(installations: 10_000, subscribeTo: "news") { server, client in
                    try await ProtocolLoad.fanOut(client, port: server.localPort, consumers: consumers, expected: 10_000, batched: batched)
                }
                benchmark.measurement(throughput[0], perSecond)
            }
        }
        }
    }
}

enum ProtocolLoad {
    static let key = "benchmark-admin-key-000000001"
    static var now: Int64 { SystemWallClock().now().millisecondsSinceEpoch / 1000 }

    /// Runs a measurement, reporting a failure as the benchmark's error.
    static func report(_ benchmark: Benchmark, _ body: () async throws -> Void) async {
        do {
            try await body()
        } catch {
            benchmark.error("\(error)")
        }
    }

    /// Signing keys in a temporary directory.
    static func withTokens<T>(_ body: (InstallationTokens) throws -> T) throws -> T {
        let directory = NSTemporaryDirectory() + "fanout-credentials-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        return try body(InstallationTokens(keys: try SigningKeys.open(directory: directory, now: Self.now)))
    }

    /// A durable engine on a temporary directory with `installations` Android installations
    /// (tokens `Fixtures.token(0...)`), optionally all subscribed to a topic, served on a free
    /// loopback port; `body` gets the server and a connected admin client.
    static func withServer<T: Sendable>(
        installations: Int,
        subscribeTo topic: String? = nil,
        _ body: (FanoutServer, FanoutClient) async throws -> T
    ) async throws -> T {
        let directory = NSTemporaryDirectory() + "fanout-protocol-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let engine = try Engine(directory: directory, durability: .always)
        defer { try? engine.close() }
        let appID = AppID("1:1065473598624:android:d7820756c5c808db03d5c5")!
        try await engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in
            for index in 0..<installations {
                try changes.register(RegistrationRequest(token: RegistrationToken(Fixtures.token(index))!, platform: .android, appID: appID))
            }
        }.durable()
        if let topic {
            Fixtures.subscribe(0..<installations, to: TopicName(topic)!, in: engine)
        }
        let keys = APIKeyStore([APIKey(name: "admin", role: .admin, projects: .all, secret: Array(Self.key.utf8))])
        let tokens = InstallationTokens(keys: try SigningKeys.open(directory: directory + "/signing-keys", now: Self.now))
        let server = try await FanoutServer.bind(engine: engine, keys: keys, tokens: tokens, configuration: ServerConfiguration(port: 0))
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await server.run() }
            defer { group.cancelAll() }
            let client = try await FanoutClient.connect(host: "127.0.0.1", port: server.localPort, apiKey: Self.key)
            defer { Task { try? await client.close() } }
            return try await body(server, client)
        }
    }

    /// Subscribes tokens 0..<count in batches of 1000 with `window` batches in flight; returns
    /// registrations subscribed per second.
    static func subscribeAll(_ client: FanoutClient, count: Int, topic: String, window: Int) async throws -> Int {
        let started = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            var inFlight = 0
            for first in stride(from: 0, to: count, by: 1000) {
                let batch = (first..<min(first + 1000, count)).map(Fixtures.token)
                group.addTask {
                    let results = try await client.subscribe(batch, to: topic)
                    precondition(results.allSatisfy { $0 == .ok })
                }
                inFlight += 1
                if inFlight >= window {
                    try await group.next()
                    inFlight -= 1
                }
            }
            try await group.waitForAll()
        }
        return Int(Double(count) / ((ContinuousClock.now - started) / .seconds(1)))
    }

    /// Sends to `news` while `consumers` connections drain it as Android workers, each
    /// acknowledging every delivery; returns deliveries received and acknowledged per second.
    static func fanOut(_ admin: FanoutClient, port: Int, consumers: Int, expected: Int, batched: Bool) async throws -> Int {
        let acknowledged = Counter()
        var clients: [FanoutClient] = []
        var streams: [DeliveryStream] = []
        for _ in 0..<consumers {
            let client = try await FanoutClient.connect(host: "127.0.0.1", port: port, apiKey: Self.key, role: .consumer)
            streams.append(try await client.attach(.platform(.android), credit: 1000))
            clients.append(client)
        }
        let all = clients
        let started = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (client, stream) in zip(all, streams) {
                group.addTask {
                    if batched {
                        // What has arrived, acknowledged with one ACK per batch.
                        while true {
                            let batch = try await stream.nextBatch()
                            if batch.isEmpty { return }
                            try await client.acknowledge(batch.map(\.id))
                            if acknowledged.add(batch.count) == expected {
                                for client in all { try? await client.detach() }
                            }
                        }
                    }
                    try await withThrowingTaskGroup(of: Void.self) { acks in
                        for try await delivery in stream {
                            acks.addTask {
                                try await client.acknowledge([delivery.id])
                                if acknowledged.add(1) == expected {
                                    for client in all { try? await client.detach() }
                                }
                            }
                        }
                        try await acks.waitForAll()
                    }
                }
            }
            let receipt = try await admin.send(#"{"message":{"topic":"news","data":{"CONFIG_STATE":"STALE"}}}"#)
            precondition(receipt.enqueued == expected)
            try await group.waitForAll()
        }
        let elapsed = (ContinuousClock.now - started) / .seconds(1)
        for client in clients { try? await client.close() }
        return Int(Double(expected) / elapsed)
    }
}

final class Counter: Sendable {
    private let value = Atomic<Int>(0)

    /// Adds and returns the new value.
    func add(_ amount: Int) -> Int {
        self.value.add(amount, ordering: .relaxed).newValue
    }
}
