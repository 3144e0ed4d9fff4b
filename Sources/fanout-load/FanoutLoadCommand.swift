import ArgumentParser
import FanoutLoad
import FanoutModel
import Foundation

/// `fanout-load`: drives fanoutd (and, in `compare`, Redis) with the workloads of a push backend.
@main
struct FanoutLoadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fanout-load",
        abstract: "Load harness for fanoutd, side by side with Redis.",
        discussion: """
            Every scenario starts a fanoutd of its own on a temporary data directory and a loopback \
            port, unless --server names a running one. Data (FIDs, 163-byte tokens, platforms, \
            Zipf-popular topics) follows from --seed alone, so runs repeat.
            """,
        subcommands: [Scenario.self, Compare.self, Floor.self],
        defaultSubcommand: Scenario.self
    )
}

struct WorkloadOptions: ParsableArguments {
    @Option(help: "Installations to register.")
    var installations = 100_000

    @Option(help: "Topics (the most popular holds --head-share of the installations, the rank-r one 1/r of that).")
    var topics = 1000

    @Option(name: .customLong("head-share"), help: "The share of installations subscribed to the most popular topic.")
    var headShare = 0.5

    @Option(help: "Seed of every random choice.")
    var seed: UInt64 = 1

    @Option(help: "Closed-loop workers (registrations, subscriptions).")
    var concurrency = 64

    @Option(help: "Connections the workers share, pipelining on them.")
    var connections = 4

    @Option(help: "Sends in send-topic and send-condition.")
    var sends = 200

    @Option(name: .customLong("send-concurrency"), help: "Sends in flight at once.")
    var sendConcurrency = 8

    @Option(help: "fanout consumer connections draining deliveries during sends.")
    var consumers = 3

    @Option(name: .customLong("idle-connections"), help: "Connections held open at once in connections.")
    var idleConnections = 10_000

    @Option(name: .customLong("batch-concurrency"), help: "Batches of 1000 in flight in register-batch.")
    var batchConcurrency = 8

    @Option(name: .customLong("batch-replies"), help: "What fanoutd answers each register-batch item with: fids (REGISTER_BATCH_FIDS) or installations (REGISTER_BATCH).")
    var batchReplies = "fids"

    @Option(name: .customLong("latency-requests"), help: "Round trips per phase in latency (one at a time).")
    var latencyRequests = 20_000

    @Option(name: .customLong("token-sends"), help: "Sends of each kind (binary protocol, HTTP front) in http-send.")
    var tokenSends = 20_000

    @Option(name: .customLong("node-snapshot-every"), help: "In cluster, each node's --snapshot-every (seconds; 0: none).")
    var nodeSnapshotEvery = 600

    @Option(help: "Operations per second in mixed (open loop).")
    var rate = 2000

    @Option(help: "Seconds mixed runs.")
    var duration = 10

    @Option(help: "always, interval:MS or none: fanoutd's --durability, and Redis's appendfsync to match (always, everysec, no).")
    var durability = "always"

    @Option(help: "The fanoutd to start (default: the one built next to fanout-load).")
    var fanoutd: String?

    @Flag(help: "Print the report as JSON.")
    var json = false

    @Flag(help: "Start fanoutd with TLS (a development certificate) and connect every client over it, to measure TLS's cost (`run` only).")
    var tls = false

    @Flag(help: "In connections, each connection is a device with its own installation's auth token (`run` only).")
    var devices = false

    @Flag(help: "No progress on standard error.")
    var quiet = false

    func validate() throws {
        guard self.installations > 0, self.topics > 0, self.concurrency > 0, self.connections > 0, self.sends > 0,
            self.sendConcurrency > 0, self.consumers > 0, self.rate > 0, self.duration > 0, self.latencyRequests > 0, self.tokenSends > 0,
            self.batchConcurrency > 0, self.idleConnections > 0, self.nodeSnapshotEvery >= 0
        else {
            throw ValidationError("sizes, counts, rates and durations must be positive")
        }
        guard self.headShare > 0, self.headShare <= 1 else {
            throw ValidationError("--head-share must be in (0, 1]")
        }
        guard BatchReplies(rawValue: self.batchReplies) != nil else {
            throw ValidationError("--batch-replies must be fids or installations")
        }
        guard Durability(parsing: self.durability) != nil else {
            throw ValidationError("--durability must be always, interval:MS or none")
        }
    }

    /// The harness for `scenario` (nil: `compare`, which runs every phase).
    func harness(for scenario: LoadScenario?) -> LoadHarness {
        var options = LoadOptions()
        options.concurrency = self.concurrency
        options.connections = self.connections
        options.sends = self.sends
        options.sendConcurrency = self.sendConcurrency
        options.consumers = self.consumers
        options.rate = self.rate
        options.duration = .seconds(self.duration)
        options.latencyRequests = self.latencyRequests
        options.tokenSends = self.tokenSends
        options.nodeSnapshotEvery = self.nodeSnapshotEvery
        options.batchConcurrency = self.batchConcurrency
        options.batchReplies = BatchReplies(rawValue: self.batchReplies) ?? .fids
        options.idleConnections = self.idleConnections
        options.quiet = self.quiet
        options.tls = self.tls
        options.devices = self.devices
        let workload = LoadWorkload(
            seed: self.seed, installations: self.installations, topics: self.topics, headShare: self.headShare,
            withBatchInstallations: scenario?.registersBatches ?? true
        )
        return LoadHarness(workload: workload, options: options, durability: self.durability, fanoutd: self.fanoutd ?? FanoutdProcess.siblingExecutable)
    }

    func print(_ report: LoadReport) {
        Swift.print(self.json ? report.json : report.table)
    }
}

struct Scenario: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run one scenario: register, register-batch, subscribe, send-topic, send-condition, mixed, recover, latency, connections, http-send, replication or cluster."
    )

    @Argument(help: "register, register-batch, subscribe, send-topic, send-condition, mixed, recover, latency, connections, http-send, replication or cluster.")
    var scenario: String

    @OptionGroup var workload: WorkloadOptions

    @Option(help: "host:port of a running fanoutd (default: start one).")
    var server: String?

    @Option(name: .customLong("api-key"), help: "Its admin key (or FANOUT_API_KEY).")
    var apiKey: String?

    @Option(name: .customLong("consumer-key"), help: "Its consumer key, to drain deliveries in the send scenarios (or FANOUT_CONSUMER_KEY).")
    var consumerKey: String?

    @Option(name: .customLong("server-pid"), help: "Its process id, to report its memory and CPU.")
    var serverPID: Int32?

    mutating func run() async throws {
        guard let scenario = LoadScenario(rawValue: self.scenario) else {
            throw ValidationError("unknown scenario \(self.scenario): use one of " + LoadScenario.allCases.map(\.rawValue).joined(separator: ", "))
        }
        var running: LoadHarness.RunningServer?
        if let server = self.server {
            guard let address = HostAndPort(server) else {
                throw ValidationError("--server must be host:port")
            }
            let environment = ProcessInfo.processInfo.environment
            guard let key = self.apiKey ?? environment["FANOUT_API_KEY"] else {
                throw ValidationError("--server needs --api-key (or FANOUT_API_KEY)")
            }
            running = .init(
                host: address.host, port: address.port, adminKey: key,
                consumerKey: self.consumerKey ?? environment["FANOUT_CONSUMER_KEY"], pid: self.serverPID
            )
        }
        let report = try await self.workload.harness(for: scenario).run(scenario, against: running)
        self.workload.print(report)
    }
}

struct Compare: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Register, subscribe, send-topic, send-condition, register-batch and (taking turns) latency against Redis and fanoutd, both started here on loopback, with the ratios.",
        discussion: """
            Redis runs with appendonly yes and the appendfsync that matches --durability; it is \
            installed with apt-get when redis-server is missing.
            """
    )

    @OptionGroup var workload: WorkloadOptions

    @Option(help: "Run the whole comparison this many times, one round after the other (taking turns at which system goes first), and report each figure's medians and every round's ratio.")
    var rounds = 1

    func validate() throws {
        guard (1...20).contains(self.rounds) else {
            throw ValidationError("--rounds must be 1 to 20")
        }
    }

    mutating func run() async throws {
        var reports: [LoadReport] = []
        for round in 0..<self.rounds {
            reports.append(try await self.workload.harness(for: nil).compare(fanoutFirst: round % 2 == 1))
        }
        // `validate` makes rounds at least 1.
        guard let report = LoadReport(rounds: reports) else { throw ValidationError("--rounds must be 1 to 20") }
        self.workload.print(report)
    }
}

struct Floor: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "A bare SwiftNIO listener answering every frame with an empty reply: the floor of a round trip, for scripts/ping-latency.py --floor.",
        discussion: "It checks nothing (not the API key, not the payload) and speaks no more of the protocol than a frame's header: measure with it, serve nothing."
    )

    @Option(help: "host:port to listen on (port 0: any; the port is printed).")
    var listen = "127.0.0.1:7498"

    mutating func run() async throws {
        guard let address = HostAndPort(self.listen) else {
            throw ValidationError("--listen must be host:port")
        }
        let server = try await FloorServer.start(host: address.host, port: address.port)
        FileHandle.standardOutput.write(Data("listening on port \(server.port)\n".utf8))
        try await server.waitUntilClosed()
    }
}
