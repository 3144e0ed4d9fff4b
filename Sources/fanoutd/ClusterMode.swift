import ArgumentParser
import FanoutCluster
import FanoutCore
import FanoutHTTP
import FanoutKeys
import FanoutServer
import Foundation
import Logging
import Prometheus
import ServiceLifecycle

extension Fanoutd {
    /// `--cluster`: this process is one node of a cluster (docs/scale-out.md). It takes part in
    /// every shard on its own directory under --data-dir (`shard-N`), owns its share, and answers
    /// any request over TCP, and with --http FCM's send and topic management over HTTP, routing
    /// each to the shards' owners; owners issue installation credentials with the node's own
    /// signing keys, whose public halves every node shares. Each shard's engine snapshots every
    /// --snapshot-every seconds; owners publish theirs and purge their streams, and sweep their
    /// shards as one fanoutd does.
    func runClusterNode(
        urls: String, durability: Durability, engine: EngineConfiguration, configuration: ServerConfiguration, httpAddress: (String, Int)?, logger: Logger
    ) async throws {
        guard let node = self.node else { throw ValidationError("--cluster needs --node NAME") }
        guard ClusterNode.isValidName(node) else {
            throw ValidationError("--node must be 1 to 64 characters of A-Z, a-z, 0-9, _ and -")
        }
        guard (1...3600).contains(self.lease) else { throw ValidationError("--lease must be 1 to 3600 seconds") }
        guard [1, 3, 5].contains(self.replicas) else { throw ValidationError("--replicas must be 1, 3 or 5") }
        guard mkdir(self.dataDirectory, 0o700) == 0 || errno == EEXIST else {
            throw ValidationError("cannot make the data directory \(self.dataDirectory): errno \(errno)")
        }
        var clusterConfiguration = ClusterNode.Configuration(
            urls: urls, node: node, directory: self.dataDirectory, shardCount: self.shards, lease: .seconds(self.lease), replicas: self.replicas
        )
        clusterConfiguration.durability = durability
        clusterConfiguration.engine = engine
        clusterConfiguration.snapshotInterval = self.snapshotEvery > 0 ? .seconds(self.snapshotEvery) : nil
        // Both listeners' request metrics and the owned shards' engine metrics (labelled with their
        // shard), served at the HTTP front's /metrics.
        let registry = PrometheusCollectorRegistry()
        let metricsFactory = HTTPFront.prometheusFactory(registry: registry)
        clusterConfiguration.metricsFactory = metricsFactory
        let clusterNode = try ClusterNode(clusterConfiguration)
        logger.info("joined the cluster", metadata: ["node": "\(node)", "shards": "\(clusterNode.map.count)", "nats": "\(urls)"])
        // The node signs auth tokens with keys of its own; every node's public keys are shared.
        let signingKeys = try ClusterSigningKeys(
            own: try SigningKeys.open(directory: (self.dataDirectory as NSString).appendingPathComponent("signing-keys"), now: Int64(Date().timeIntervalSince1970)),
            node: clusterNode
        )
        let cluster = try ClusterService(
            node: clusterNode, signingKeys: signingKeys, tokenLifetime: Int64(self.authTokenLifetime),
            signingKeyLifetime: self.signingKeyLifetimeDays > 0 ? Int64(self.signingKeyLifetimeDays) * 86_400 : nil,
            maximumPayloadSize: configuration.maximumPayloadSize, logger: logger
        )
        let (keys, keyFile) = try self.loadKeys(logger: logger)
        let server: FanoutServer
        do {
            server = try await FanoutServer.bind(cluster: cluster, keys: keys, metricsFactory: metricsFactory, configuration: configuration, logger: logger)
        } catch {
            clusterNode.close()
            throw ListenError(description: "cannot listen on \(configuration.host):\(configuration.port): \(error)")
        }
        // Shut down in reverse order: the server answers what it applied, then the node hands its
        // shards on and closes their engines.
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [
            .init(service: cluster), .init(service: server), .init(service: KeyReloadService(server: server, keyFile: keyFile, logger: logger)),
        ]
        if let (httpHost, httpPort) = httpAddress {
            let backend = ClusterHTTPBackend(cluster: cluster)
            let front = HTTPFront(backend: backend, credentials: backend, keys: { [server] in server.keys }, metrics: registry, metricsFactory: metricsFactory)
            services.append(.init(service: try self.httpApplication(front, host: httpHost, port: httpPort, tls: configuration.tls, logger: logger)))
        }
        let dataDirectory = self.dataDirectory
        try await self.runServices(services, logger: logger) { [self] in
            logger.info("listening", metadata: ["address": "\(configuration.host):\(server.localPort)", "tls": "\(configuration.tls == nil ? "off" : "on")", "data-dir": "\(dataDirectory)", "durability": "\(durability)"])
            try self.writeReadyFile(host: configuration.host, port: server.localPort)
        }
        logger.info("stopped; the shards are handed on and their logs synced")
    }
}
