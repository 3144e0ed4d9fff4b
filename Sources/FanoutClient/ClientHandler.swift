internal import FanoutModel
internal import FanoutWire
internal import NIOCore

/// A request on its way: what to send, the promise its reply completes and, for ATTACH, where
/// the deliveries go.
struct PendingRequest: Sendable {
    var request: ClientRequest
    var reply: ReplyPromise
    var deliveries: DeliveryStream?
}

/// A reply promise that may be completed from two places (the handler, or a failed write that
/// never reached it); the first completion wins.
final class ReplyPromise: @unchecked Sendable {
    // Safe: `completed` is read and written only on the channel's event loop.
    private let promise: EventLoopPromise<ServerMessage>
    private var completed = false

    init(_ promise: EventLoopPromise<ServerMessage>) {
        self.promise = promise
    }

    var futureResult: EventLoopFuture<ServerMessage> { self.promise.futureResult }

    func succeed(_ message: ServerMessage) {
        self.promise.futureResult.eventLoop.preconditionInEventLoop()
        guard !self.completed else { return }
        self.completed = true
        self.promise.succeed(message)
    }

    func fail(_ error: any Error) {
        self.promise.futureResult.eventLoop.preconditionInEventLoop()
        guard !self.completed else { return }
        self.completed = true
        self.promise.fail(error)
    }
}

/// Numbers requests, matches replies to them by request id (in any order), routes DELIVERY and
/// DELIVERIES frames to the attachment's stream, sends PING when the connection has been quiet,
/// and fails everything outstanding when the connection goes.
final class ClientHandler: ChannelDuplexHandler {
    typealias InboundIn = ServerFrame
    typealias OutboundIn = PendingRequest
    typealias OutboundOut = ClientFrame

    private var nextRequestID: UInt32 = 1
    private var pending: [UInt32: ReplyPromise] = [:]
    private var deliveries: DeliveryStream?
    private var attachID: UInt32?
    /// Set by GOAWAY: the reason later requests fail with.
    private var goAway: FanoutError?
    /// A flush is due at the end of what the event loop is running now.
    private var flushScheduled = false

    private func takeRequestID() -> UInt32 {
        let id = self.nextRequestID
        self.nextRequestID = self.nextRequestID == .max ? 1 : self.nextRequestID + 1
        return id
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let request = Self.unwrapOutboundIn(data)
        if let goAway = self.goAway {
            request.reply.fail(goAway)
            promise?.fail(goAway)
            return
        }
        let id = self.takeRequestID()
        self.pending[id] = request.reply
        if let deliveries = request.deliveries {
            self.deliveries?.finish()
            self.deliveries = deliveries
            self.attachID = id
        }
        let written = promise ?? context.eventLoop.makePromise()
        written.futureResult.assumeIsolated().whenFailure { [weak self] error in
            self?.pending.removeValue(forKey: id)?.fail(FanoutClient.connectionError(error))
        }
        context.write(Self.wrapOutboundOut(ClientFrame(requestID: id, request: request.request)), promise: written)
    }

    /// Flushes once for every request written in this turn of the event loop: tasks that send at
    /// the same time queue their writes on the loop, and they leave in one `write`.
    func flush(context: ChannelHandlerContext) {
        guard !self.flushScheduled else { return }
        self.flushScheduled = true
        context.eventLoop.assumeIsolated().execute {
            self.flushScheduled = false
            context.flush()
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = Self.unwrapInboundIn(data)
        switch frame.message {
        case .delivery(let delivery):
            if frame.requestID == self.attachID {
                self.deliveries?.yield(delivery)
            }
        case .deliveries(let deliveries):
            if frame.requestID == self.attachID {
                self.deliveries?.yield(contentsOf: deliveries)
            }
        case .goAway(let code, let reason):
            self.goAway = FanoutError(code, "the server said GOAWAY: \(reason)")
        case .welcome(let welcome):
            // Keep-alive: PING after a third of the idle timeout without a write (added here, on the
            // event loop, so that it starts with the session whatever the caller's tasks are doing).
            let keepAlive = TimeAmount.milliseconds(Int64(max(welcome.idleTimeoutMilliseconds / 3, 100)))
            try? context.pipeline.syncOperations.addHandler(IdleStateHandler(writeTimeout: keepAlive), position: .first)
            self.pending.removeValue(forKey: frame.requestID)?.succeed(frame.message)
        default:
            guard let reply = self.pending.removeValue(forKey: frame.requestID) else { return }  // a keep-alive PONG
            if case .done(.detach) = frame.message {
                self.deliveries?.finish()
                self.deliveries = nil
                self.attachID = nil
            }
            reply.succeed(frame.message)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let idle = event as? IdleStateHandler.IdleStateEvent, idle == .write {
            context.writeAndFlush(Self.wrapOutboundOut(ClientFrame(requestID: self.takeRequestID(), request: .ping)), promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.failAll(FanoutClient.connectionError(error))
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.failAll(self.goAway ?? FanoutError(.unavailable, "the connection is closed"))
        context.fireChannelInactive()
    }

    private func failAll(_ error: any Error) {
        let pending = self.pending
        self.pending = [:]
        for reply in pending.values { reply.fail(error) }
        self.deliveries?.finish(throwing: error)
        self.deliveries = nil
        self.attachID = nil
    }
}

@available(*, unavailable)
extension ClientHandler: Sendable {}
