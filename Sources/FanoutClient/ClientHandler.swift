internal import FanoutModel
internal import FanoutWire
internal import NIOCore

/// Writes the requests `ClientConnection` hands it, decodes the server's frames itself
/// (`FrameReader`, no `ByteToMessageHandler` in front), matches replies to requests by request id
/// (in any order), routes DELIVERY and DELIVERIES frames to the attachment's stream, sends PING
/// when the connection has been quiet, and fails everything outstanding when the connection goes.
final class ClientHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var context: ChannelHandlerContext?
    private var replies = FrameReader<ServerMessage>(maximumPayloadSize: ClientConnection.maximumPayloadSize)
    private var pending: [UInt32: UnsafeContinuation<ServerMessage, any Error>] = [:]
    private var deliveries: DeliveryStream?
    private var attachID: UInt32?
    /// Set by GOAWAY: the reason later requests fail with.
    private var goAway: FanoutError?
    /// Set when the connection has gone: what outstanding and later requests fail with.
    private var closed: FanoutError?

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        self.failAll(self.goAway ?? FanoutError(.unavailable, "the connection is closed"))
    }

    /// Writes the requests' frames with one flush; their replies resume their continuations.
    func send(_ requests: [OutgoingRequest]) {
        guard let context, self.closed == nil, self.goAway == nil else {
            let error = self.goAway ?? self.closed ?? FanoutError(.unavailable, "the connection is closed")
            for request in requests {
                request.deliveries?.finish(throwing: error)
                request.reply.resume(throwing: error)
            }
            return
        }
        for request in requests {
            self.pending[request.id] = request.reply
            if let deliveries = request.deliveries {
                self.deliveries?.finish()
                self.deliveries = deliveries
                self.attachID = request.id
            }
            // No promise: a write that fails closes the channel, and `channelInactive` fails
            // every request still pending.
            context.write(Self.wrapOutboundOut(request.frame), promise: nil)
        }
        context.flush()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = Self.unwrapInboundIn(data)
        self.replies.append(&bytes)
        do {
            while let frame = try self.replies.nextReply(seenEOF: false) {
                self.receive(frame, context: context)
            }
        } catch {
            self.errorCaught(context: context, error: error)
        }
    }

    private func receive(_ frame: ServerFrame, context: ChannelHandlerContext) {
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
            self.pending.removeValue(forKey: frame.requestID)?.resume(returning: frame.message)
        default:
            guard let reply = self.pending.removeValue(forKey: frame.requestID) else { return }  // a keep-alive PONG
            if case .done(.detach) = frame.message {
                self.deliveries?.finish()
                self.deliveries = nil
                self.attachID = nil
            }
            reply.resume(returning: frame.message)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let idle = event as? IdleStateHandler.IdleStateEvent, idle == .write {
            // Request id 0: no request waits for its PONG.
            var ping = context.channel.allocator.buffer(capacity: FrameHeader.size)
            try? ClientFrame(requestID: 0, request: .ping).encode(into: &ping)
            context.writeAndFlush(Self.wrapOutboundOut(ping), promise: nil)
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

    private func failAll(_ error: FanoutError) {
        if self.closed == nil {
            self.closed = error
        }
        let pending = self.pending
        self.pending = [:]
        for reply in pending.values { reply.resume(throwing: error) }
        self.deliveries?.finish(throwing: error)
        self.deliveries = nil
        self.attachID = nil
    }
}

@available(*, unavailable)
extension ClientHandler: Sendable {}
