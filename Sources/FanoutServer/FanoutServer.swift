public import FanoutCore
public import FanoutKeys
internal import FanoutWire
public import Logging
public import NIOCore
public import NIOPosix
public import ServiceLifecycle

/// The fanout TCP server (docs/wire-protocol.md): a `Service` serving one engine. `bind` opens the
/// listening socket; `run` serves until cancelled or shut down gracefully, when it stops
/// accepting, stops reading, sends the replies of what it applied, says GOAWAY and closes. The
/// caller closes the engine afterwards (which syncs the log).
public final class FanoutServer: Service, Sendable, CustomStringConvertible {
    private let listener: NIOAsyncChannel<NIOAsyncChannel<ClientFrame, ServerFrame>, Never>
    private let connection: Connection

    /// The port the server listens on (the one picked when the configuration said 0).
    public let localPort: Int

    private init(listener: NIOAsyncChannel<NIOAsyncChannel<ClientFrame, ServerFrame>, Never>, connection: Connection) {
        self.listener = listener
        self.connection = connection
        self.localPort = listener.channel.localAddress?.port ?? 0
    }

    /// Opens the listening socket.
    public static func bind(
        engine: Engine,
        keys: APIKeyStore,
        configuration: ServerConfiguration = ServerConfiguration(),
        logger: Logger = Logger(label: "fanoutd"),
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> FanoutServer {
        let maximumPayloadSize = configuration.maximumPayloadSize
        let idleTimeout = TimeAmount(configuration.idleTimeout)
        let stallTimeout = TimeAmount(configuration.stallTimeout)
        let highWaterMark = configuration.writeBufferHighWaterMark
        let listener = try await ServerBootstrap(group: eventLoopGroup)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(.backlog, value: 256)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            // A client that shuts its write side still gets every reply, then the close.
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelOption(.writeBufferWaterMark, value: .init(low: highWaterMark / 2, high: highWaterMark))
            .bind(host: configuration.host, port: configuration.port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    try pipeline.addHandler(ByteToMessageHandler(FrameDecoder<ClientRequest>(maximumPayloadSize: maximumPayloadSize)))
                    try pipeline.addHandler(MessageToByteHandler(FrameEncoder<ServerMessage>(maximumPayloadSize: maximumPayloadSize)))
                    try pipeline.addHandler(IdleStateHandler(readTimeout: idleTimeout))
                    try pipeline.addHandler(ConnectionGuardHandler(stallTimeout: stallTimeout))
                    return try NIOAsyncChannel<ClientFrame, ServerFrame>(
                        wrappingChannelSynchronously: channel,
                        configuration: .init(backPressureStrategy: .init(lowWatermark: 16, highWatermark: 64))
                    )
                }
            }
        let welcome = Welcome(
            maximumPayloadSize: UInt32(clamping: maximumPayloadSize),
            idleTimeoutMilliseconds: UInt32(clamping: idleTimeout.nanoseconds / 1_000_000),
            maximumCredit: UInt32(clamping: configuration.maximumCredit),
            maximumInFlight: UInt32(clamping: configuration.maximumInFlight),
            projects: []
        )
        let connection = Connection(
            executor: RequestExecutor(engine: engine, maximumPayloadSize: maximumPayloadSize),
            configuration: configuration,
            keys: keys,
            welcome: welcome,
            logger: logger
        )
        return FanoutServer(listener: listener, connection: connection)
    }

    public var description: String { "FanoutServer(port: \(self.localPort))" }

    public func run() async throws {
        let connection = self.connection
        let listener = self.listener
        try await withGracefulShutdownHandler {
            try await listener.executeThenClose { inbound in
                try await withThrowingDiscardingTaskGroup { group in
                    for try await channel in inbound {
                        group.addTask { await connection.serve(channel) }
                    }
                }
            }
        } onGracefulShutdown: {
            listener.channel.close(promise: nil)
        }
    }
}
