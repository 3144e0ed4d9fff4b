import FanoutClient
import FanoutCluster
import FanoutCore
import FanoutTestSupport
import FanoutWire
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A cluster as users run it: three nats-servers forming one JetStream cluster (streams and
/// buckets with three replicas) and three `fanoutd --cluster` processes. Under a load of
/// registrations and subscriptions through every node, one node that owns shards is killed
/// (SIGKILL), and later one NATS server: every change a node acknowledged is still there, and a
/// send to a topic (which needs every shard's owner) works again within the stated time.
@Suite("A cluster of fanoutd processes", .serialized)
struct ClusterFailoverTests {
    /// Tokens (or lines) the load's workers record, from several tasks.
    final class Acknowledged: @unchecked Sendable {
        private let lock = NSLock()
        private var tokens: [String] = []

        func add(_ token: String) { self.lock.withLock { self.tokens.append(token) } }
        var all: [String] { self.lock.withLock { self.tokens } }
        var count: Int { self.lock.withLock { self.tokens.count } }
    }

    /// `count` tokens (`prefix-N`) registered and subscribed to `all`, by four workers through the
    /// nodes at `ports` in turn; a request that fails (the node died, its shard has no owner yet)
    /// is sent again through the next node, for 120 s at most. A token is recorded once both its
    /// requests were answered, the subscription's item `ok`.
    static func load(
        _ count: Int, prefix: String, key: String, ports: @escaping @Sendable () -> [Int], into acknowledged: Acknowledged, refusals: Acknowledged
    ) async {
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<4 {
                group.addTask {
                    var client: FanoutClient?
                    var turn = worker
                    let deadline = ContinuousClock.now + .seconds(120)
                    for index in stride(from: worker, to: count, by: 4) {
                        let token = "\(prefix)-\(index)"
                        while ContinuousClock.now < deadline {
                            do {
                                if client == nil {
                                    let live = ports()
                                    turn += 1
                                    client = try await FanoutClient.connect(host: "127.0.0.1", port: live[turn % live.count], apiKey: key)
                                }
                                _ = try await client!.register(RegistrationFields(token: token, platform: .android, appID: "1:1:android:a"))
                                // A batch's item can fail on its own: UNAVAILABLE while its shard
                                // has no owner (sent again); anything else is wrong (the token was
                                // just registered).
                                let results = try await client!.subscribe([token], to: "all")
                                guard results == [.ok] else {
                                    if results != [.failed(.unavailable)] { refusals.add("\(token): \(results)") }
                                    try? await Task.sleep(for: .milliseconds(100))
                                    continue
                                }
                                acknowledged.add(token)
                                break
                            } catch {
                                try? await client?.close()
                                client = nil
                                try? await Task.sleep(for: .milliseconds(100))
                            }
                        }
                    }
                    try? await client?.close()
                }
            }
        }
    }

    /// How long until a send to a topic through `port` is answered (every shard has an owner).
    static func timeUntilSendsWork(port: Int, key: String) async throws -> Duration {
        let started = ContinuousClock.now
        while ContinuousClock.now - started < .seconds(60) {
            if let client = try? await FanoutClient.connect(host: "127.0.0.1", port: port, apiKey: key) {
                defer { Task { try? await client.close() } }
                if (try? await client.send(#"{"message": {"topic": "all", "data": {"k": "v"}}}"#)) != nil {
                    return ContinuousClock.now - started
                }
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        return .seconds(60)
    }

    @Test func killingAnOwnerOrANATSServerLosesNoAcknowledgedChange() async throws {
        guard let executable = NATSServerProcess.installedExecutable else {
            Issue.record("no nats-server: `make test` installs it (apt: nats-server)")
            return
        }
        let directory = TemporaryDirectory.path("cluster")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let nats = try await NATSServerProcess.cluster(3, executable: executable, directory: directory)
        defer { nats.forEach { $0.kill() } }
        let urls = nats.map(\.url).joined(separator: ",")

        let created = try FanoutCLITests.fanout(["key", "create", "--file", "\(directory)/api-keys", "--name", "admin", "--role", "admin"])
        let key = created.output.trimmingCharacters(in: .whitespacesAndNewlines)
        var daemons: [FanoutdTests.Daemon] = []
        defer { for daemon in daemons where daemon.process.isRunning { _ = daemon.stop() } }
        for index in 1...3 {
            daemons.append(try FanoutdTests.Daemon(directory: "\(directory)/node-\(index)", arguments: [
                "--cluster", urls, "--node", "node-\(index)", "--shards", "8", "--replicas", "3", "--lease", "2", "--api-keys", "\(directory)/api-keys",
            ]))
        }
        // Every shard owned, each node owning its share.
        let settled = ContinuousClock.now + .seconds(60)
        var status = try ClusterStatus.read(urls: urls)
        while ContinuousClock.now < settled, status.shards.contains(where: { $0.owner == nil }) || Set(status.shards.compactMap(\.owner)).count < 3 {
            try await Task.sleep(for: .milliseconds(200))
            status = try ClusterStatus.read(urls: urls)
        }
        try #require(status.shards.allSatisfy { $0.owner != nil } && Set(status.shards.compactMap(\.owner)).count == 3, "\(status.table)")

        // Load through every node; once some of it is acknowledged, the node owning the most shards is killed.
        let owners = Dictionary(grouping: status.shards.compactMap(\.owner), by: { $0 }).mapValues(\.count)
        let victim = try #require(owners.max { $0.value < $1.value }?.key)
        let victimIndex = try #require(Int(victim.dropFirst("node-".count))) - 1
        let killed = Acknowledged()  // holds the victim's name once killed
        let ports = daemons.map(\.port)
        let livePorts: @Sendable () -> [Int] = { killed.count == 0 ? ports : ports.enumerated().filter { $0.offset != victimIndex }.map(\.element) }
        let acknowledged = Acknowledged()
        let refusals = Acknowledged()  // subscription items refused other than UNAVAILABLE
        let load = Task { await Self.load(600, prefix: "before", key: key, ports: livePorts, into: acknowledged, refusals: refusals) }
        while acknowledged.count < 150 { try await Task.sleep(for: .milliseconds(20)) }
        Glibc.kill(daemons[victimIndex].process.processIdentifier, SIGKILL)
        daemons[victimIndex].process.waitUntilExit()
        killed.add(victim)
        let survivor = ports[(victimIndex + 1) % 3]
        let failover = try await Self.timeUntilSendsWork(port: survivor, key: key)
        await load.value
        #expect(acknowledged.count == 600, "the load went on through the other nodes")
        // The lease (2 s) runs out, then a turn (a third of it) takes the shards.
        #expect(failover < .seconds(10), "sends work again \(failover) after the kill")

        // Then one NATS server is killed: the streams keep two of three replicas.
        nats[(victimIndex + 2) % 3].kill()
        await Self.load(300, prefix: "after", key: key, ports: livePorts, into: acknowledged, refusals: refusals)
        #expect(acknowledged.count == 900)
        #expect(refusals.all.isEmpty, "\(refusals.all.prefix(10))")

        // Every acknowledged change is there, through a surviving node. A read is tried again for
        // up to 10 s while a shard has no owner (a NATS server's loss can let leases lapse).
        let client = try await FanoutClient.connect(host: "127.0.0.1", port: survivor, apiKey: key)
        func retried<Value>(_ read: () async throws -> Value) async throws -> Value {
            for _ in 0..<100 {
                if let value = try? await read() { return value }
                try await Task.sleep(for: .milliseconds(100))
            }
            return try await read()
        }
        var missing: [String] = []
        for token in acknowledged.all {
            let installation = try? await retried { try await client.installation(token) }
            let topics = try? await retried { try await client.topics(of: token) }
            if installation?.token?.value != token || topics != ["all"] { missing.append(token) }
        }
        #expect(missing.isEmpty, "\(missing.count) acknowledged changes missing: \(missing.prefix(10))")
        #expect(try await retried { try await client.audience(.topic("all")) } == 900)
        #expect(try await retried { try await client.installationCount() } == 900)
        try await client.close()
    }
}
