import ArgumentParser
import FanoutCore
import FanoutKeys
import FanoutServer
import Foundation
import Logging
import ServiceLifecycle
import UnixSignals
import FanoutWire
import NIOSSL
import FanoutHTTP
import Hummingbird
import HummingbirdHTTP2
import CoreMetrics
import Prometheus

/// `fanoutd`: the fanout engine on a data directory, served over TCP (docs/wire-protocol.md).
/// Configuration and a ServiceGroup, nothing else.
@main
struct Fanoutd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fanoutd",
        abstract: "The fanout server: FCM-style registry, topic fan-out and delivery over a small binary protocol.",
        discussion: """
            With no options it serves ./fanout-data on 127.0.0.1:7400. On first start it creates an \
            admin API key, stores it in DATA_DIR/api-keys and prints it once. SIGTERM or SIGINT shut \
            it down gracefully: stop accepting, answer what was applied, sync the log, exit.
            """
    )

    @Option(name: .customLong("data-dir"), help: "The data directory (created when missing).")
    var dataDirectory = "./fanout-data"

    @Option(help: "host:port to listen on (port 0 picks a free port).")
    var listen = "127.0.0.1:7400"

    @Option(help: "always (fdatasync before every reply), interval:MS, or none.")
    var durability = "always"

    @Option(help: "host:port for the HTTP front (FCM's HTTP v1 send, health, the JWK Set; docs/http-api.md). Off unless given; `make run` uses 127.0.0.1:7401.")
    var http: String?

    @Option(name: .customLong("tls-cert"), help: "TLS: the certificate chain, PEM (leaf first). With --tls-key, every connection is TLS 1.2 or 1.3.")
    var tlsCertificate: String?

    @Option(name: .customLong("tls-key"), help: "TLS: the certificate's private key, PEM.")
    var tlsKey: String?

    @Option(name: .customLong("tls-client-ca"), help: "TLS: require client certificates signed by this CA (PEM): mutual TLS.")
    var tlsClientCA: String?

    @Flag(name: .customLong("insecure-plaintext"), help: "Allow plain TCP on an address other than loopback (without it, fanoutd refuses to).")
    var insecurePlaintext = false

    @Option(name: .customLong("auth-token-lifetime"), help: "Seconds an installation auth token is valid (default 604800: 7 days, as Firebase Installations).")
    var authTokenLifetime = 604_800

    @Option(name: .customLong("signing-key-lifetime"), help: "Days the key that signs auth tokens signs before a new one replaces it (0: only `fanout auth rotate`). Tokens it signed stay valid until they expire.")
    var signingKeyLifetimeDays = 90

    @Option(name: .customLong("api-keys"), help: "The API key file (default: DATA_DIR/api-keys, created with one admin key when missing).")
    var apiKeys: String?

    @Option(name: .customLong("snapshot-every"), help: "Seconds between snapshots (0: none; `fanout snapshot` can write one offline).")
    var snapshotEvery = 600

    @Flag(name: .customLong("keep-previous-log"), help: "After a snapshot, keep the log from the snapshot before it on (a damaged newest snapshot then loses nothing), instead of deleting the log the new snapshot covers.")
    var keepPreviousLog = false

    @Option(name: .customLong("idle-timeout"), help: "Seconds of silence after which a connection is closed.")
    var idleTimeout = 60

    @Option(name: .customLong("handshake-timeout"), help: "Seconds a new connection has to finish HELLO (and TLS) before it is closed.")
    var handshakeTimeout = 10

    @Option(name: .customLong("max-pending-handshakes"), help: "Connections that may be waiting for their HELLO at once; past it, new ones are closed at once.")
    var maximumPendingHandshakes = 256

    @Option(name: .customLong("ready-file"), help: "Once listening, write host:port to this file (written to a temporary name, then renamed), for scripts and harnesses.")
    var readyFile: String?

    @Option(name: .customLong("shutdown-grace"), help: "Seconds a graceful shutdown (SIGTERM, SIGINT) may take to answer what it applied before connections are cut.")
    var shutdownGrace = 30

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel = "info"

    @Option(name: .customLong("malloc-policy"), help: "compact (glibc's mmap threshold fixed at 1 MiB: less resident memory, a few percent of throughput) or glibc (its own dynamic threshold). An operator's MALLOC_MMAP_THRESHOLD_ or GLIBC_TUNABLES wins either way.")
    var mallocPolicy = "compact"

    @Option(name: .customLong("stale-after"), help: "Days without activity after which an installation is stale (listed, and skipped by sends that ask).")
    var staleAfterDays = 30

    @Option(name: .customLong("expire-after"), help: "Days without activity after which an installation expires and is deleted (at start, then hourly).")
    var expireAfterDays = 270

    @Option(name: .customLong("anonymous-user-lifetime"), help: "Days after its creation an anonymous user is cleaned up (automatically in projects that turned it on).")
    var anonymousUserLifetimeDays = 30

    @Option(name: .customLong("project-messages-per-minute"), help: "Messages one project may send a minute (FCM's quota: 600000; 0: no limit). Over it, sends get RESOURCE_EXHAUSTED (HTTP 429 with Retry-After).")
    var projectMessagesPerMinute = 600_000

    @Option(name: .customLong("device-messages-per-minute"), help: "Messages one device may be sent a minute by sends to its token or FID (FCM: 240; 0: no limit).")
    var deviceMessagesPerMinute = 240

    @Option(name: .customLong("device-messages-per-hour"), help: "Messages one device may be sent an hour by sends to its token or FID (FCM: 5000; 0: no limit).")
    var deviceMessagesPerHour = 5000

    @Option(help: "Run as a node of the cluster at these NATS servers (nats://HOST:PORT, comma-separated; docs/scale-out.md). Needs --node.")
    var cluster: String?

    @Option(help: "With --cluster: this node's name, unique in the cluster (A-Z a-z 0-9 _ -, at most 64).")
    var node: String?

    @Option(help: "With --cluster: the shard count, when this node creates the cluster (1 to 4096; a node joining an existing cluster may omit it, or must give the same).")
    var shards: Int?

    @Option(help: "With --cluster: seconds a shard's owner holds it without renewing (failover takes about this long).")
    var lease = 3

    @Option(help: "With --cluster: copies of each shard's stream and of the cluster's buckets in JetStream (1 on one NATS server, 3 on three).")
    var replicas = 1

    mutating func run() async throws {
        switch self.mallocPolicy {
        case "compact": AllocatorPolicy.apply(environment: ProcessInfo.processInfo.environment)
        case "glibc": break
        default: throw ValidationError("--malloc-policy must be compact or glibc")
        }
        guard let level = Logger.Level(rawValue: self.logLevel) else {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical")
        }
        guard let durability = Durability(parsing: self.durability) else {
            throw ValidationError("--durability must be always, none or interval:MS")
        }
        let (host, port) = try Self.listenAddress(self.listen, option: "--listen")
        for (name, days) in [("--stale-after", self.staleAfterDays), ("--expire-after", self.expireAfterDays), ("--anonymous-user-lifetime", self.anonymousUserLifetimeDays)]
        where !(1...36_500).contains(days) {
            throw ValidationError("\(name) must be 1 to 36500 days, got \(days)")
        }
        for (name, count) in [
            ("--project-messages-per-minute", self.projectMessagesPerMinute), ("--device-messages-per-minute", self.deviceMessagesPerMinute),
            ("--device-messages-per-hour", self.deviceMessagesPerHour),
        ] where !(0...1_000_000_000).contains(count) {
            throw ValidationError("\(name) must be 0 (no limit) to 1000000000, got \(count)")
        }
        guard (60...31_536_000).contains(self.authTokenLifetime) else {
            throw ValidationError("--auth-token-lifetime must be 60 to 31536000 seconds")
        }
        guard (0...36_500).contains(self.signingKeyLifetimeDays) else {
            throw ValidationError("--signing-key-lifetime must be 0 to 36500 days")
        }
        let tls = try self.tlsConfiguration(host: host)
        let httpAddress = try self.http.map { try Self.listenAddress($0, option: "--http") }
        if let (httpHost, _) = httpAddress, tls == nil, !Self.isLoopback(httpHost), !self.insecurePlaintext {
            throw ValidationError("refusing to serve HTTP in plain text on \(httpHost), which is not a loopback address: give --tls-cert and --tls-key, or --insecure-plaintext")
        }
        // Before anything is created: a taken address must not leave a new data directory and key.
        try ListenCheck.check(host: host, port: port)
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "fanoutd")

        var engineConfiguration = EngineConfiguration()
        engineConfiguration.logRetention = self.keepPreviousLog ? .sincePreviousSnapshot : .sinceNewestSnapshot
        engineConfiguration.staleAfter = .seconds(self.staleAfterDays * 86_400)
        engineConfiguration.expireAfter = .seconds(self.expireAfterDays * 86_400)
        engineConfiguration.anonymousUserLifetime = .seconds(self.anonymousUserLifetimeDays * 86_400)
        engineConfiguration.sendQuota = SendQuota(
            projectMessagesPerMinute: self.projectMessagesPerMinute,
            deviceMessagesPerMinute: self.deviceMessagesPerMinute,
            deviceMessagesPerHour: self.deviceMessagesPerHour
        )
        if let urls = self.cluster {
            try await self.runClusterNode(
                urls: urls, durability: durability, engine: engineConfiguration, configuration: self.serverConfiguration(host: host, port: port, tls: tls),
                httpAddress: httpAddress, logger: logger
            )
            return
        }
        // Metrics go to one Prometheus registry, served at the HTTP front's /metrics.
        let registry = PrometheusCollectorRegistry()
        let metricsFactory = HTTPFront.prometheusFactory(registry: registry)
        MetricsSystem.bootstrap(metricsFactory)
        let engine = try Engine(
            directory: self.dataDirectory,
            durability: durability,
            configuration: engineConfiguration,
            metrics: EngineMetrics(factory: metricsFactory),
            logger: logger
        )
        if let recovery = engine.recovery {
            logger.info("recovered", metadata: ["report": "\(recovery)"])
        }
        let (keys, keyFile) = try self.loadKeys(logger: logger)
        let signingKeys = try SigningKeys.open(
            directory: (self.dataDirectory as NSString).appendingPathComponent("signing-keys"),
            now: engine.clock.now().secondsSinceEpoch
        )
        let tokens = InstallationTokens(keys: signingKeys, lifetime: Int64(self.authTokenLifetime))
        let configuration = self.serverConfiguration(host: host, port: port, tls: tls)
        let server: FanoutServer
        do {
            server = try await FanoutServer.bind(engine: engine, keys: keys, tokens: tokens, configuration: configuration, logger: logger)
        } catch {
            try? engine.close()
            throw ListenError(description: "cannot listen on \(host):\(port): \(error)")
        }
        var maintenance = MaintenanceService(
            engine: engine,
            snapshotInterval: self.snapshotEvery > 0 ? .seconds(self.snapshotEvery) : nil,
            logger: logger
        )
        maintenance.tokens = tokens
        maintenance.signingKeyLifetime = self.signingKeyLifetimeDays > 0 ? Int64(self.signingKeyLifetimeDays) * 86_400 : nil
        maintenance.afterPrune = { [server] in server.recheckDeviceCredentials() }
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [
            .init(service: server), .init(service: maintenance), .init(service: KeyReloadService(server: server, keyFile: keyFile, logger: logger)),
        ]
        if let (httpHost, httpPort) = httpAddress {
            let front = HTTPFront(
                engine: engine, keys: { [server] in server.keys }, tokens: tokens, metrics: registry,
                credentialsChanged: { [server] project in server.recheckDeviceCredentials(in: project.value) }
            )
            services.append(.init(service: try self.httpApplication(front, host: httpHost, port: httpPort, tls: tls, logger: logger)))
        }
        let (dataDirectory, tlsMode) = (self.dataDirectory, self.tlsMode(tls))
        try await self.runServices(services, logger: logger) { [self] in
            logger.info("listening", metadata: ["address": "\(host):\(server.localPort)", "tls": "\(tlsMode)", "data-dir": "\(dataDirectory)", "durability": "\(durability)"])
            try self.writeReadyFile(host: host, port: server.localPort)
        }
        try engine.close()
        logger.info("stopped; the log is synced")
    }

    /// The HTTP front's listener: with the TCP listener's TLS, HTTP/2 for clients that offer it
    /// (ALPN), else HTTP/1.1; both with the front's channel handlers, which serve an engine's sends
    /// on the event loop.
    func httpApplication(_ front: HTTPFront, host: String, port: Int, tls: TLSConfiguration?, logger: Logger) throws -> some Service {
        let tlsMode = self.tlsMode(tls)
        return Application(
            router: front.router(),
            server: try tls.map {
                try .http2Upgrade(tlsConfiguration: $0, configuration: .init(streamConfiguration: .init(additionalChannelHandlers: front.channelHandlers())))
            } ?? front.http1(),
            configuration: .init(address: .hostname(host, port: port), serverName: "fanoutd"),
            onServerRunning: { channel in
                logger.info("HTTP front listening", metadata: ["address": "\(host):\(channel.localAddress?.port ?? port)", "tls": "\(tlsMode)"])
            },
            logger: logger
        )
    }

    /// How the listeners speak TLS, for the log: off, on, or mutual (client certificates).
    func tlsMode(_ tls: TLSConfiguration?) -> String {
        tls == nil ? "off" : self.tlsClientCA != nil ? "mutual" : "on"
    }

    func serverConfiguration(host: String, port: Int, tls: TLSConfiguration?) -> ServerConfiguration {
        var configuration = ServerConfiguration(host: host, port: port)
        configuration.idleTimeout = .seconds(self.idleTimeout)
        configuration.handshakeTimeout = .seconds(max(1, self.handshakeTimeout))
        configuration.maximumPendingHandshakes = max(1, self.maximumPendingHandshakes)
        configuration.tls = tls
        return configuration
    }

    /// Once listening: host:port in --ready-file (written to a temporary name, then renamed).
    func writeReadyFile(host: String, port: Int) throws {
        guard let readyFile = self.readyFile else { return }
        let temporary = readyFile + ".tmp"
        guard FileManager.default.createFile(atPath: temporary, contents: Data("\(host):\(port)\n".utf8)), rename(temporary, readyFile) == 0 else {
            throw ValidationError("cannot write the ready file \(readyFile)")
        }
    }

    /// Runs the services until SIGTERM or SIGINT (or one of them fails), then shuts them down in
    /// reverse order, for --shutdown-grace at most. `announce` says fanoutd serves, once the
    /// signals are trapped (`ReadinessAnnouncement`); what it throws ends the group and is thrown.
    func runServices(_ services: [ServiceGroupConfiguration.ServiceConfiguration], logger: Logger, announce: @escaping @Sendable () throws -> Void) async throws {
        let announcement = ReadinessAnnouncement(announce)
        let services = services + [.init(service: announcement)]
        var configuration = ServiceGroupConfiguration(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        configuration.maximumGracefulShutdownDuration = .seconds(max(1, self.shutdownGrace))
        do {
            try await ServiceGroup(configuration: configuration).run()
        } catch {
            logger.error("stopped", metadata: ["error": "\(error)"])
        }
        if let error = announcement.error { throw error }
    }

    /// The key file: the one given, or DATA_DIR/api-keys. On the first start (no DATA_DIR/api-keys)
    /// it is created with a fresh admin key, which is printed once and also left in DATA_DIR/admin-key
    /// (0600) for the CLI on this machine. Keys a file holds in clear are rewritten as hashes.
    func loadKeys(logger: Logger) throws -> (APIKeyStore, path: String) {
        let path = self.keyFilePath
        if FileManager.default.fileExists(atPath: path) {
            let keys = try APIKeyFile.read(path)
            guard !keys.keys.isEmpty else {
                throw ValidationError("\(path) holds no keys")
            }
            if keys.clearKeyLines > 0 {
                // The CLI found its admin key in the old file: leave it where the CLI now looks.
                if self.apiKeys == nil, let admin = keys.firstClearAdminKey, !FileManager.default.fileExists(atPath: self.adminKeyPath) {
                    try SecretFile.write(admin + "\n", to: self.adminKeyPath)
                }
                try APIKeyFile.write(keys, to: path)
                logger.notice("the key file held keys in clear; it now holds their SHA-256 only", metadata: ["file": "\(path)", "keys": "\(keys.clearKeyLines)"])
            }
            return (keys, path)
        }
        guard self.apiKeys == nil else {
            throw ValidationError("the key file \(path) does not exist")
        }
        let (secret, key) = try APIKey.generate(name: "admin", role: .admin, projects: .all)
        let store = APIKeyStore([key])
        try SecretFile.write(secret + "\n", to: self.adminKeyPath)
        try APIKeyFile.write(store, to: path)
        print("fanoutd: created the admin API key `admin` for every project. \(path) keeps its hash; the key is shown now and left in \(self.adminKeyPath) for the CLI on this machine (delete that file once you keep the key elsewhere):")
        print(secret)
        fflush(nil)
        return (store, path)
    }

    private var adminKeyPath: String {
        (self.dataDirectory as NSString).appendingPathComponent("admin-key")
    }

    private var keyFilePath: String {
        self.apiKeys ?? (self.dataDirectory as NSString).appendingPathComponent("api-keys")
    }

    /// The server's TLS from the options; nil for plain TCP, which only a loopback address gets
    /// without --insecure-plaintext.
    private func tlsConfiguration(host: String) throws -> TLSConfiguration? {
        switch (self.tlsCertificate, self.tlsKey) {
        case (let certificate?, let key?):
            do {
                return try ServerConfiguration.tls(certificate: certificate, privateKey: key, clientCA: self.tlsClientCA)
            } catch {
                throw ValidationError("cannot load the TLS certificate, key or client CA: \(error)")
            }
        case (nil, nil):
            guard self.tlsClientCA == nil else { throw ValidationError("--tls-client-ca needs --tls-cert and --tls-key") }
            guard Self.isLoopback(host) || self.insecurePlaintext else {
                throw ValidationError("refusing to listen in plain text on \(host), which is not a loopback address: give --tls-cert and --tls-key, or --insecure-plaintext")
            }
            return nil
        default:
            throw ValidationError("--tls-cert and --tls-key go together")
        }
    }

    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }

    /// The address a listener binds: no host means every address.
    static func listenAddress(_ text: String, option: String) throws -> (String, Int) {
        guard let address = HostAndPort(text) else { throw ValidationError("\(option) must be host:port") }
        return (address.host.isEmpty ? "0.0.0.0" : address.host, address.port)
    }
}
