package import CoreMetrics
public import FanoutCore
public import FanoutKeys
internal import FanoutModel
public import FanoutWire
public import Logging
public import NIOCore
public import NIOPosix
internal import NIOSSL
public import ServiceLifecycle

/// The fanout TCP server (docs/wire-protocol.md): a `Service` serving one engine. `bind` opens the
/// listening socket; `run` serves until cancelled or shut down gracefully, when it stops
/// accepting, stops reading, sends the replies of what it applied, says GOAWAY and closes, and
/// returns once every connection has closed. The caller closes the engine afterwards (which syncs
/// the log). Each connection is served on its event loop by a `ConnectionHandler`.
public final class FanoutServer: Service, Sendable, CustomStringConvertible {
    private let listener: any Channel
    private let connections: OpenConnections
    private let keyRing: KeyRing
    private let devices: DeviceConnections
    private let strangers: StrangerLimits

    /// The port the server listens on (the one picked when the configuration said 0).
    public let localPort: Int

    private init(listener: any Channel, connections: OpenConnections, keys: KeyRing, devices: DeviceConnections, strangers: StrangerLimits) {
        self.listener = listener
        self.connections = connections
        self.keyRing = keys
        self.devices = devices
        self.strangers = strangers
        self.localPort = listener.localAddress?.port ?? 0
    }

    /// Replaces the keys the server accepts. New connections authenticate against `keys`; an open
    /// connection whose key is no longer among them as it was (revoked, or its role or projects
    /// changed) answers what it applied, gets GOAWAY `UNAUTHENTICATED` and is closed. The others
    /// carry on undisturbed.
    public func reloadKeys(_ keys: APIKeyStore) {
        self.keyRing.replace(with: keys)
        for channel in self.connections.open() {
            channel.pipeline.fireUserInboundEventTriggered(KeyRing.Reloaded(keys: keys))
        }
    }

    /// Opens the listening socket. With `tokens`, the server issues installation credentials and
    /// accepts devices (docs/security.md); without, it refuses them.
    public static func bind(
        engine: Engine,
        keys: APIKeyStore,
        tokens: InstallationTokens? = nil,
        configuration: ServerConfiguration = ServerConfiguration(),
        logger: Logger = Logger(label: "fanoutd"),
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> FanoutServer {
        try await Self.bind(
            engine: engine, keys: keys, tokens: tokens, router: nil, metricsFactory: engine.metrics.factory, configuration: configuration, logger: logger,
            eventLoopGroup: eventLoopGroup
        )
    }

    /// Opens the listening socket of a cluster node (docs/scale-out.md): requests go to the owners
    /// of the shards they touch, through `cluster` (run it as a service next to the server). Its
    /// requests are counted with `metricsFactory`.
    package static func bind(
        cluster: ClusterService,
        keys: APIKeyStore,
        metricsFactory: any MetricsFactory = MetricsSystem.factory,
        configuration: ServerConfiguration = ServerConfiguration(),
        logger: Logger = Logger(label: "fanoutd"),
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> FanoutServer {
        // The connections' own engine serves nothing but their clock and metrics here: every
        // request that reaches an engine goes to a shard's.
        let server = try await Self.bind(
            engine: Engine(), keys: keys, tokens: cluster.tokens, router: cluster.router, metricsFactory: metricsFactory, configuration: configuration, logger: logger,
            eventLoopGroup: eventLoopGroup
        )
        // Credentials replaced or deleted on any node reach this node's copies of the shards a
        // moment later: its device connections check theirs after each turn.
        cluster.afterEachTurn { [weak server] in server?.recheckDeviceCredentials() }
        return server
    }

    private static func bind(
        engine: Engine,
        keys: APIKeyStore,
        tokens: InstallationTokens?,
        router: ClusterRouter?,
        metricsFactory: any MetricsFactory,
        configuration: ServerConfiguration,
        logger: Logger,
        eventLoopGroup: any EventLoopGroup
    ) async throws -> FanoutServer {
        let maximumPayloadSize = configuration.maximumPayloadSize
        let idleTimeout = TimeAmount(configuration.idleTimeout)
        let stallTimeout = TimeAmount(configuration.stallTimeout)
        let highWaterMark = configuration.writeBufferHighWaterMark
        let welcome = Welcome(
            maximumPayloadSize: UInt32(clamping: maximumPayloadSize),
            idleTimeoutMilliseconds: UInt32(clamping: idleTimeout.nanoseconds / 1_000_000),
            maximumCredit: UInt32(clamping: configuration.maximumCredit),
            maximumInFlight: UInt32(clamping: configuration.maximumInFlight),
            projects: []
        )
        let keyRing = KeyRing(keys)
        let strangers = StrangerLimits(.init(
            handshakeTimeout: TimeAmount(configuration.handshakeTimeout),
            maximumPendingHandshakes: configuration.maximumPendingHandshakes,
            failureDelay: TimeAmount(configuration.authenticationFailureDelay),
            maximumFailureDelay: TimeAmount(configuration.maximumAuthenticationFailureDelay)
        ))
        let settings = ConnectionSettings(
            executor: RequestExecutor(engine: engine, maximumPayloadSize: maximumPayloadSize, tokens: tokens, strangers: strangers),
            keys: keyRing,
            welcome: welcome,
            maximumInFlight: configuration.maximumInFlight,
            logger: logger,
            strangers: strangers,
            metrics: ServerMetrics(factory: metricsFactory),
            router: router
        )
        let tls = try configuration.tls.map(NIOSSLContext.init(configuration:))
        let connections = OpenConnections()
        let listener = try await ServerBootstrap(group: eventLoopGroup)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(.backlog, value: 256)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            // A client that shuts its write side still gets every reply, then the close.
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelOption(.writeBufferWaterMark, value: .init(low: highWaterMark / 2, high: highWaterMark))
            .childChannelOption(.recvAllocator, value: AdaptiveRecvByteBufferAllocator.frames)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    guard connections.add(channel) else { throw ChannelError.ioOnClosedChannel }  // shutting down
                    let pipeline = channel.pipeline.syncOperations
                    if let tls { try pipeline.addHandler(NIOSSLServerHandler(context: tls)) }
                    try pipeline.addHandler(IdleStateHandler(readTimeout: idleTimeout))
                    try pipeline.addHandler(ConnectionGuardHandler(stallTimeout: stallTimeout))
                    try pipeline.addHandler(ConnectionHandler(settings: settings))
                }
            }
            .bind(host: configuration.host, port: configuration.port)
            .get()
        return FanoutServer(listener: listener, connections: connections, keys: keyRing, devices: settings.devices, strangers: strangers)
    }

    /// The API keys the server accepts now (after the last `reloadKeys`).
    public var keys: APIKeyStore { self.keyRing.current }

    /// What the server did with its connections since it started (STATS carries the same).
    public var connectionStatistics: ConnectionStatistics { self.strangers.statistics }

    /// After changes made outside the server (a prune by the maintenance service), every open
    /// device connection checks that its installation and credentials still live.
    public func recheckDeviceCredentials() {
        self.devices.recheckAll()
    }

    /// The open device connections of `project` check their credentials now (after another front,
    /// such as the HTTP front's Firebase Installations calls, deleted an installation or replaced
    /// its credentials).
    public func recheckDeviceCredentials(in project: String) {
        self.devices.recheck(project: project)
    }

    public var description: String { "FanoutServer(port: \(self.localPort))" }

    public func run() async throws {
        let listener = self.listener
        let connections = self.connections
        try await withGracefulShutdownHandler {
            try await withTaskCancellationHandler {
                try await listener.closeFuture.get()
                await connections.allClosed()
            } onCancel: {
                listener.close(promise: nil)
                for channel in connections.stop() { channel.close(promise: nil) }
            }
        } onGracefulShutdown: {
            listener.close(promise: nil)
            for channel in connections.stop() {
                channel.pipeline.fireUserInboundEventTriggered(ConnectionGuardHandler.StopReading())
            }
        }
    }
}

/// The server's open connections: a graceful shutdown stops each, and `run` waits for them to close.
private final class OpenConnections: Sendable {
    private struct State {
        var channels: [ObjectIdentifier: any Channel] = [:]
        var stopping = false
    }

    private let state = Locked(State())

    /// Adds a new connection, removed when it closes; false once the server is stopping.
    func add(_ channel: any Channel) -> Bool {
        let key = ObjectIdentifier(channel)
        let added = self.state.withLock { state in
            guard !state.stopping else { return false }
            state.channels[key] = channel
            return true
        }
        if added {
            channel.closeFuture.whenComplete { _ in self.state.withLock { _ = $0.channels.removeValue(forKey: key) } }
        }
        return added
    }

    /// The open connections.
    func open() -> [any Channel] {
        self.state.withLock { Array($0.channels.values) }
    }

    /// Refuses new connections; returns the open ones.
    func stop() -> [any Channel] {
        self.state.withLock { state in
            state.stopping = true
            return Array(state.channels.values)
        }
    }

    /// Returns once every connection has closed (call after `stop`, or once the listener is closed).
    func allClosed() async {
        self.state.withLock { $0.stopping = true }
        while let channel = self.state.withLock({ $0.channels.values.first }) {
            try? await channel.closeFuture.get()
            self.state.withLock { _ = $0.channels.removeValue(forKey: ObjectIdentifier(channel)) }
        }
    }
}
