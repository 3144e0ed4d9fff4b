internal import FanoutCore
internal import FanoutWire
internal import NIOCore

/// Closes connections that are silent or stuck: on the idle event of the `IdleStateHandler` in
/// front of it, it sends GOAWAY and closes; when the channel stays unwritable (output buffered
/// above the high-water mark: a peer that does not read) for `stallTimeout`, it closes.
final class ConnectionGuardHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ClientFrame
    typealias InboundOut = ClientFrame

    private let stallTimeout: TimeAmount
    private var stall: Scheduled<Void>?

    init(stallTimeout: TimeAmount) {
        self.stallTimeout = stallTimeout
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let idle = event as? IdleStateHandler.IdleStateEvent, idle == .read {
            let goAway = ServerFrame(requestID: 0, message: .goAway(.unavailable, "idle timeout"))
            context.writeAndFlush(NIOAny(goAway)).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            self.stall?.cancel()
            self.stall = nil
        } else if self.stall == nil {
            self.stall = context.eventLoop.assumeIsolated().scheduleTask(in: self.stallTimeout) {
                context.close(promise: nil)
            }
        }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.stall?.cancel()
        self.stall = nil
        context.fireChannelInactive()
    }
}

@available(*, unavailable)
extension ConnectionGuardHandler: Sendable {}
