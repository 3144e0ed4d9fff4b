import DequeModule
import NIOCore

/// Pairs replies with the pipelines waiting for them (Redis answers in order): a pipeline is
/// written as one buffer of `count` commands and its promise gets their `count` replies, so any
/// number of pipelines may be in flight on one connection.
final class RedisCommandHandler: ChannelDuplexHandler {
    typealias InboundIn = RESPValue
    typealias OutboundIn = (commands: ByteBuffer, count: Int, replies: EventLoopPromise<[RESPValue]>)
    typealias OutboundOut = ByteBuffer

    private struct Waiting {
        var count: Int
        var replies: [RESPValue]
        let promise: EventLoopPromise<[RESPValue]>
    }

    private var waiting: Deque<Waiting> = []

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let (commands, count, replies) = self.unwrapOutboundIn(data)
        var values: [RESPValue] = []
        values.reserveCapacity(count)
        self.waiting.append(Waiting(count: count, replies: values, promise: replies))
        context.write(self.wrapOutboundOut(commands), promise: promise)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let value = self.unwrapInboundIn(data)
        guard !self.waiting.isEmpty else {
            context.fireErrorCaught(RESPError("a reply to no command"))
            context.close(promise: nil)
            return
        }
        self.waiting[self.waiting.startIndex].replies.append(value)
        if self.waiting[self.waiting.startIndex].replies.count == self.waiting[self.waiting.startIndex].count {
            let done = self.waiting.removeFirst()
            done.promise.succeed(done.replies)
        }
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
        while let waiting = self.waiting.popFirst() {
            waiting.promise.fail(error)
        }
    }
}

@available(*, unavailable)
extension RedisCommandHandler: Sendable {}
