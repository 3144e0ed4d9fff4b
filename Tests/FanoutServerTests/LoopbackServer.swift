import FanoutClient
import FanoutCore
import FanoutKeys
import FanoutServer
import FanoutTestSupport
import FanoutWire
import Foundation
import Logging
import NIOCore
import NIOEmbedded
import NIOPosix
import Testing

/// A `fanoutd` in the test process: a durable engine on a temporary directory and a server on
/// 127.0.0.1 port 0, with three keys.
enum LoopbackServer {
    static let adminKey = "test-admin-key-0000000001"
    static let shopAdminKey = "shop-admin-key-0000000001"
    static let consumerKey = "consumer-key-000000000001"
    /// An app's key for `default`: it registers installations with their credentials, nothing else.
    static let appKey = "app-key-00000000000000001"

    /// The servers of these tests wait this long for a silent connection (the idle rule is tested
    /// on its own, with short timeouts). On a 2-core machine the test process's client tasks can
    /// stall for over a minute while other tests' blocking work (subprocesses, file damage) holds
    /// both threads of the concurrency pool; with the 60 s default, the server then rightly
    /// closed those idle connections and unrelated tests failed.
    /// For the same reason the handshake deadline is as long, and the tests that refuse many HELLOs
    /// in a row are not slowed down by the delay after failures (`StrangerLimitsTests` test both).
    static let configuration: ServerConfiguration = {
        var configuration = ServerConfiguration(port: 0, idleTimeout: .seconds(900))
        configuration.handshakeTimeout = .seconds(900)
        configuration.authenticationFailureDelay = .milliseconds(1)
        configuration.maximumAuthenticationFailureDelay = .milliseconds(4)
        return configuration
    }()

    static let keys = APIKeyStore([
        APIKey(name: "admin", role: .admin, projects: .all, secret: Array(adminKey.utf8)),
        APIKey(name: "shop-admin", role: .admin, projects: .only(["shop-app"]), secret: Array(shopAdminKey.utf8)),
        APIKey(name: "consumer", role: .consumer, projects: .all, secret: Array(consumerKey.utf8)),
        APIKey(name: "app", role: .app, projects: .only(["default"]), secret: Array(appKey.utf8)),
    ])

    /// Opens the engine on `directory`, serves it while `body` runs, then stops the server and
    /// closes the engine.
    static func serve<T>(
        directory: String,
        configuration: ServerConfiguration = LoopbackServer.configuration,
        _ body: (_ port: Int, _ engine: Engine) async throws -> T
    ) async throws -> T {
        try await Self.withServer(directory: directory, configuration: configuration) { server, engine in
            try await body(server.localPort, engine)
        }
    }

    /// `serve`, handing `body` the server itself. With `tokens`, the server issues installation
    /// credentials (`LoopbackServer.tokens(in:)` makes them).
    static func withServer<T>(
        directory: String,
        configuration: ServerConfiguration = LoopbackServer.configuration,
        tokens: InstallationTokens? = nil,
        clock: any WallClock = SystemWallClock(),
        _ body: (_ server: FanoutServer, _ engine: Engine) async throws -> T
    ) async throws -> T {
        let engine = try Engine(directory: directory, clock: clock)
        defer { try? engine.close() }
        var configuration = configuration
        configuration.host = "127.0.0.1"
        configuration.port = 0
        let server = try await FanoutServer.bind(engine: engine, keys: Self.keys, tokens: tokens, configuration: configuration, logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await server.run() }
            defer { group.cancelAll() }
            return try await body(server, engine)
        }
    }

    /// Signing keys in `directory`/signing-keys and auth tokens valid for `lifetime` seconds.
    static func tokens(in directory: String, lifetime: Int64 = 7 * 86_400, now: Int64 = SystemWallClock().now().millisecondsSinceEpoch / 1000) throws -> InstallationTokens {
        InstallationTokens(keys: try SigningKeys.open(directory: directory + "/signing-keys", now: now), lifetime: lifetime)
    }

    static func connect(_ port: Int, key: String = adminKey, role: Hello.Role = .admin) async throws -> FanoutClient {
        try await FanoutClient.connect(host: "127.0.0.1", port: port, apiKey: key, role: role)
    }
}

/// A connection that writes raw bytes and reads decoded server frames, for the protocol's edges.
struct RawConnection {
    let channel: NIOAsyncChannel<ServerFrame, ByteBuffer>

    /// - Parameter halfClosing: finishing the outbound writer shuts the socket's write side.
    static func open(_ port: Int, halfClosing: Bool = false) async throws -> RawConnection {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.allowRemoteHalfClosure, value: true)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(FrameDecoder<ServerMessage>(maximumPayloadSize: 1 << 26)))
                    return try NIOAsyncChannel<ServerFrame, ByteBuffer>(
                        wrappingChannelSynchronously: channel,
                        configuration: .init(isOutboundHalfClosureEnabled: halfClosing)
                    )
                }
            }
        return RawConnection(channel: channel)
    }

    static func bytes(_ frame: ClientFrame) throws -> ByteBuffer {
        var buffer = ByteBuffer()
        try frame.encode(into: &buffer)
        return buffer
    }

    static func hello(key: String = LoopbackServer.adminKey, role: Hello.Role = .admin, id: UInt32 = 1) throws -> ByteBuffer {
        try Self.bytes(ClientFrame(requestID: id, request: .hello(Hello(role: role, credential: .apiKey(Array(key.utf8)), clientName: "raw"))))
    }

    /// Writes `bytes`, then reads every frame until the server closes the connection.
    func exchange(_ writes: [ByteBuffer], closeAfterWriting: Bool = false) async throws -> [ServerFrame] {
        try await self.channel.executeThenClose { inbound, outbound in
            for bytes in writes { try await outbound.write(bytes) }
            if closeAfterWriting { outbound.finish() }
            var frames: [ServerFrame] = []
            do {
                for try await frame in inbound { frames.append(frame) }
            } catch {
                // A reset after the server's error frame ends the stream the same way.
            }
            return frames
        }
    }

    /// Writes `bytes` and reads exactly `count` frames, leaving the connection open for more.
    static func frames(_ count: Int, from iterator: inout NIOAsyncChannelInboundStream<ServerFrame>.AsyncIterator) async throws -> [ServerFrame] {
        var frames: [ServerFrame] = []
        while frames.count < count, let frame = try await iterator.next() { frames.append(frame) }
        return frames
    }
}

extension EmbeddedChannel {
    /// The frames of each buffer the server side has written so far (it writes encoded frames,
    /// several to a buffer).
    func readServerWrites() throws -> [[ServerFrame]] {
        var decoder = FrameDecoder<ServerMessage>(maximumPayloadSize: 1 << 26)
        var writes: [[ServerFrame]] = []
        while var buffer = try self.readOutbound(as: ByteBuffer.self) {
            var frames: [ServerFrame] = []
            while let frame = try decoder.decode(buffer: &buffer) { frames.append(frame) }
            #expect(buffer.readableBytes == 0, "a buffer ends at a frame's end")
            writes.append(frames)
        }
        return writes
    }

    /// Every frame the server side has written so far.
    func readServerFrames() throws -> [ServerFrame] {
        try self.readServerWrites().flatMap { $0 }
    }
}
