import DequeModule
import NIOCore

/// Pairs each reply with the oldest command waiting for one (Redis answers in order), so any
/// number of commands may be in flight on one connection.
final class RedisCommandHandler: ChannelDuplexHandler {
    typealias InboundIn = RESPValue
    typealias OutboundIn = (command: ByteBuffer, reply: EventLoopPromise<RESPValue>)
    typealias OutboundOut = ByteBuffer

    private var waiting: Deque<EventLoopPromise<RESPValue>> = []

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let (command, reply) = self.unwrapOutboundIn(data)
        self.waiting.append(reply)
        context.write(self.wrapOutboundOut(command), promise: promise)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let value = self.unwrapInboundIn(data)
        guard let reply = self.waiting.popFirst() else {
            context.fireErrorCaught(RESPError("a reply to no command"))
            context.close(promise: nil)
            return
        }
        reply.succeed(value)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.failAll(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.failAll(RESPError("the connection to Redis closed"))
        context.fireChannelInactive()
    }

    private func failAll(_ error: any Error) {
        while let reply = self.waiting.popFirst() {
            reply.fail(error)
        }
    }
}

@available(*, unavailable)
extension RedisCommandHandler: Sendable {}
