internal import FanoutCore
internal import FanoutWire
internal import NIOCore

/// Closes connections that are silent or stuck: on the idle event of the `IdleStateHandler` in
/// front of it, it sends GOAWAY and closes; when the channel stays unwritable (output buffered
/// above the high-water mark: a peer that does not read) for `stallTimeout`, it closes.
///
/// On `StopReading` (a graceful shutdown, a revoked key) it passes no more bytes on and passes the event on (the
/// `ConnectionHandler` ends its input and decodes nothing more), at a frame boundary: frames already decoded are applied
/// and answered, the rest (complete or not) are dropped unapplied, without an error. It keeps draining the socket, so
/// that once the server has shut its output (after GOAWAY) the close is a lingering one: it closes
/// when the peer does, or `lingerTimeout` after the output closed. (Closing a socket with unread
/// input sends a reset, and a reset can destroy replies the peer has not read yet.)
final class ConnectionGuardHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// The user event that stops reading requests; the peer is told `goAway` once the replies of
    /// what was applied have left.
    struct StopReading: Sendable {
        var goAway: ServerMessage = .goAway(.unavailable, "shutting down")
    }

    static let lingerTimeout = TimeAmount.seconds(2)

    private let stallTimeout: TimeAmount
    private var stall: Scheduled<Void>?
    private var linger: Scheduled<Void>?
    private var stopped = false

    init(stallTimeout: TimeAmount) {
        self.stallTimeout = stallTimeout
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !self.stopped else { return }
        context.fireChannelRead(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if self.stopped {
            context.read()  // keep draining what the peer still sends
            return
        }
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is StopReading {
            guard !self.stopped else { return }
            self.stopped = true
            context.fireUserInboundEventTriggered(event)  // the connection ends its input
            context.read()
            return
        }
        if self.stopped, let event = event as? ChannelEvent {
            switch event {
            case .inputClosed:
                context.close(promise: nil)  // the peer is done: nothing unread is left
            case .outputClosed:
                self.linger = context.eventLoop.assumeIsolated().scheduleTask(in: Self.lingerTimeout) {
                    context.close(promise: nil)
                }
            }
            return
        }
        if let idle = event as? IdleStateHandler.IdleStateEvent, idle == .read {
            // Encoded here: frames leave the server's pipeline as bytes (see `ConnectionHandler`).
            var goAway = context.channel.allocator.buffer(capacity: 32)
            try? ServerFrame(requestID: 0, message: .goAway(.unavailable, "idle timeout")).encode(into: &goAway)
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
        self.linger?.cancel()
        self.linger = nil
        context.fireChannelInactive()
    }
}

@available(*, unavailable)
extension ConnectionGuardHandler: Sendable {}
