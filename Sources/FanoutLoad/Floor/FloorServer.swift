internal import FanoutWire
internal import NIOCore
internal import NIOPosix

/// The least a SwiftNIO server spends on a round trip: a listener whose one handler answers every
/// frame with an empty frame of the request's opcode with the reply bit set (HELLO gets 0x81,
/// PING 0x82), checking nothing else. `scripts/ping-latency.py --floor` measures it beside
/// fanoutd and Redis, so that fanoutd's cost per request splits into what SwiftNIO's channel
/// costs and what fanoutd adds (docs/performance.md). Not a server for anything else: it does not
/// speak the protocol.
public final class FloorServer: Sendable {
    /// The port it listens on.
    public let port: Int
    private let channel: any Channel

    private init(channel: any Channel, port: Int) {
        self.channel = channel
        self.port = port
    }

    /// Listens on `host`:`port` (0: any free port).
    public static func start(host: String, port: Int) async throws -> FloorServer {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(EmptyReplies()) }
            }
            .bind(host: host, port: port)
            .get()
        return FloorServer(channel: channel, port: channel.localAddress?.port ?? port)
    }

    /// Returns once the listener is closed.
    public func waitUntilClosed() async throws {
        try await self.channel.closeFuture.get()
    }

    /// Stops listening (connections already open stay).
    public func close() async throws {
        try await self.channel.close()
    }
}

/// Answers each whole frame with an empty frame (opcode | 0x80, the same request id), all of a
/// read's replies in one write.
private final class EmptyReplies: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var input = ByteBuffer()
    private var output: ByteBuffer?

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = Self.unwrapInboundIn(data)
        self.input.writeBuffer(&bytes)
        while let header = FrameHeader.peek(in: self.input) {
            let length = Int(header.payloadLength)
            guard length <= FrameHeader.defaultMaximumPayloadSize else {
                context.close(promise: nil)  // not buffered: a frame over fanoutd's own limit
                return
            }
            guard self.input.readableBytes >= FrameHeader.size + length else { break }
            self.input.moveReaderIndex(forwardBy: FrameHeader.size + length)
            var output = self.output ?? context.channel.allocator.buffer(capacity: 64)
            // An empty payload is never over the maximum: this cannot throw.
            try? output.writeFrame(opcode: header.opcode.reply, requestID: header.requestID, maximumPayloadSize: 0) { _ in }
            self.output = output
        }
        self.input.discardReadBytes()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        guard let output = self.output else { return }
        self.output = nil
        context.writeAndFlush(Self.wrapOutboundOut(output), promise: nil)
    }
}
