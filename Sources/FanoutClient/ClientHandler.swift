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
    /// The keep-alive's timer, from WELCOME on.
    private var keepAlive: RepeatedTask?
    /// Something was written since the keep-alive last looked.
    private var wroteSinceKeepAlive = false

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        self.connectionEnded()
    }

    /// What requests fail with once the connection has gone: GOAWAY's reason, or `UNAVAILABLE`.
    private var endReason: FanoutError {
        self.goAway ?? FanoutError(.unavailable, "the connection is closed")
    }

    /// Writes the requests' frames with one flush; their replies resume their continuations.
    func send(_ requests: [OutgoingRequest]) {
        guard let context, self.closed == nil, self.goAway == nil else {
            let error = self.goAway ?? self.closed ?? self.endReason
            for request in requests { request.fail(error) }
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
            if let payload = request.payload { context.write(Self.wrapOutboundOut(payload), promise: nil) }
        }
        context.flush()
        self.wroteSinceKeepAlive = true
    }

    /// The caller of request `id` was cancelled: its wait ends now, and its reply, if one comes,
    /// is dropped.
    func cancel(_ id: UInt32) {
        self.pending.removeValue(forKey: id)?.resume(throwing: CancellationError())
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
            self.startKeepAlive(idleTimeoutMilliseconds: welcome.idleTimeoutMilliseconds, context: context)
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

    /// Keep-alive: every third of the server's idle timeout, a PING if nothing was written in the
    /// whole of the last third (so the server hears from the client at least every two thirds).
    /// Started on the event loop with the session, whatever the caller's tasks are doing. A flag
    /// set per write, not NIO's `IdleStateHandler`, which made a promise, a callback and a clock
    /// read for every write.
    private func startKeepAlive(idleTimeoutMilliseconds: UInt32, context: ChannelHandlerContext) {
        let interval = TimeAmount.milliseconds(Int64(max(idleTimeoutMilliseconds / 3, 100)))
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        self.keepAlive?.cancel()
        self.keepAlive = context.eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in
            loopBound.value.keepAliveTick()
        }
    }

    private func keepAliveTick() {
        guard !self.wroteSinceKeepAlive else {
            self.wroteSinceKeepAlive = false
            return
        }
        guard let context, self.closed == nil else { return }
        // Request id 0: no request waits for its PONG.
        var ping = context.channel.allocator.buffer(capacity: FrameHeader.size)
        try? ClientFrame(requestID: 0, request: .ping).encode(into: &ping)
        context.writeAndFlush(Self.wrapOutboundOut(ping), promise: nil)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.failAll(FanoutClient.connectionError(error))
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.connectionEnded()
        context.fireChannelInactive()
    }

    /// The connection has gone (inactive, or the handler removed): the keep-alive stops, and
    /// everything outstanding fails.
    private func connectionEnded() {
        self.keepAlive?.cancel()
        self.keepAlive = nil
        self.failAll(self.endReason)
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
