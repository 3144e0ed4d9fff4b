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

    /// Writes the commands with one flush and waits for all their replies, in order.
    public func pipeline(_ commands: [[String]]) async throws -> [RESPValue] {
        let eventLoop = self.channel.eventLoop
        var replies: [EventLoopFuture<RESPValue>] = []
        replies.reserveCapacity(commands.count)
        for arguments in commands {
            var buffer = self.channel.allocator.buffer(capacity: 64 + arguments.reduce(0) { $0 + $1.utf8.count + 16 })
            RESPValue.command(arguments).write(into: &buffer)
            let reply = eventLoop.makePromise(of: RESPValue.self)
            self.channel.write((command: buffer, reply: reply), promise: nil)
            replies.append(reply.futureResult)
        }
        self.channel.flush()
        var values: [RESPValue] = []
        values.reserveCapacity(replies.count)
        for reply in replies {
            values.append(try await reply.get())
        }
        return values
    }

    public func close() async throws {
        try await self.channel.close()
    }
}
