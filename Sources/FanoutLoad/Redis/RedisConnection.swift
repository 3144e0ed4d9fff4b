public import NIOCore
public import NIOPosix

/// A small Redis client: RESP2 over one TCP connection, commands pipelined from any number of
/// tasks (replies come back in order). Error replies are returned as `.error`, not thrown.
public final class RedisConnection: Sendable {
    private let channel: any Channel

    private init(channel: any Channel) {
        self.channel = channel
    }

    public static func connect(
        host: String,
        port: Int,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> RedisConnection {
        let channel = try await ClientBootstrap(group: eventLoopGroup)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .connect(host: host, port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(RESPDecoder()))
                    try channel.pipeline.syncOperations.addHandler(RedisCommandHandler())
                    return channel
                }
            }
        return RedisConnection(channel: channel)
    }

    /// Sends one command and waits for its reply.
    public func send(_ arguments: [String]) async throws -> RESPValue {
        try await self.pipeline([arguments])[0]
    }

    /// Writes the commands in one buffer with one flush and waits for all their replies, in order.
    public func pipeline(_ commands: [[String]]) async throws -> [RESPValue] {
        guard !commands.isEmpty else { return [] }
        return try await self.pipeline(encoded: RESPValue.encodedCommands(commands, allocator: self.channel.allocator), count: commands.count)
    }

    /// Writes `count` commands already in RESP (`RESPValue.encodedCommands`) with one flush and
    /// waits for their replies, in order.
    public func pipeline(encoded buffer: ByteBuffer, count: Int) async throws -> [RESPValue] {
        // One hop onto the event loop, as FanoutClient makes per request: the write and the wait
        // for the replies are set up there.
        let channel = self.channel
        return try await withUnsafeThrowingContinuation { continuation in
            channel.eventLoop.execute {
                let replies = channel.eventLoop.makePromise(of: [RESPValue].self)
                replies.futureResult.assumeIsolated().whenComplete { continuation.resume(with: $0) }
                channel.writeAndFlush((commands: buffer, count: count, replies: replies), promise: nil)
            }
        }
    }

    public func close() async throws {
        try await self.channel.close()
    }
}
