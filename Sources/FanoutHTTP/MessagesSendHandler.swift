internal import FanoutCore
internal import FanoutKeys
internal import NIOCore

/// Serves FCM's send, `POST /v1/projects/{project}/messages:send`, on the connection's event loop,
/// as the TCP listener serves its frames: the send is applied where its request is decoded, and
/// only the wait for the log is asynchronous. Every other request passes on to Hummingbird's
/// router, which runs each connection as a task (about three times the CPU per request).
///
/// It sits after an HTTP codec, on its `Parts`: on an HTTP/1.1 connection NIOHTTP1's, before
/// Hummingbird's conversion to HTTP types (`FrontHTTP1Channel`); on an HTTP/2 stream HTTP types'.
/// Answers go out in the order the requests came, as HTTP/1.1 pipelining needs: while one request
/// is being answered, by this handler or by the router, whatever the connection brings next (parts,
/// errors, events) waits here, and once something waits, reading pauses until it is taken up.
final class MessagesSendHandler<Parts: SendHandlerParts>: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = Parts.RequestPart
    typealias InboundOut = Parts.RequestPart
    typealias OutboundIn = Parts.ResponsePart
    typealias OutboundOut = Parts.ResponsePart

    private enum State {
        /// Between requests.
        case idle
        /// Reading a send's body.
        case reading(Send)
        /// A send applied and waiting for the log; its answer ends it.
        case answering(Send)
        /// A send answered before its body ended (too large): the rest is read and dropped.
        case discarding
        /// A request the router serves: its parts pass on until its end (`requestEnded`), and the
        /// end of the router's answer (`answered`) ends it.
        case forwarding(requestEnded: Bool, answered: Bool)
    }

    private struct Send {
        let head: SendRequestHead
        /// The body so far.
        var body: ByteBuffer
        /// Whether the body grew past `HTTPFront.maximumBodySize` (and was refused at once).
        var isTooLarge = false
        let started: ContinuousClock.Instant
        /// Whether the request's end was read.
        var ended = false
    }

    /// What arrived while a request was being answered.
    private enum Held {
        case part(Parts.RequestPart)
        case error(any Error)
        case event(Any)
    }

    private let engine: Engine
    private let keys: @Sendable () -> APIKeyStore
    private let metrics: HTTPRequestMetrics
    private var state = State.idle
    private var held = CircularBuffer<Held>()
    /// Events that came while a send's body was being read: passed on after its answer.
    private var eventsAfterAnswer: [Any] = []
    private var readWithheld = false
    private var date = HTTPDate()

    init(engine: Engine, keys: @escaping @Sendable () -> APIKeyStore, metrics: HTTPRequestMetrics) {
        self.engine = engine
        self.keys = keys
        self.metrics = metrics
    }

    /// Whether a request is being answered, so that what comes next must wait.
    private var isHolding: Bool {
        switch self.state {
        case .answering: return true
        case .forwarding(let requestEnded, _): return requestEnded
        case .idle, .reading, .discarding: return false
        }
    }

    // MARK: - Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.arrived(.part(self.unwrapInboundIn(data)), context: context)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.arrived(.error(error), context: context)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // A quiesce (graceful shutdown) or the input's end waits for the answer in progress, so
        // that the router's connection task does not close the connection under it.
        self.arrived(.event(event), context: context)
    }

    private func arrived(_ item: Held, context: ChannelHandlerContext) {
        guard !self.isHolding, self.held.isEmpty else {
            return self.held.append(item)
        }
        if case .event(let event) = item, case .reading = self.state {
            // Not held with the parts: the body that follows must still come in.
            return self.eventsAfterAnswer.append(event)
        }
        self.take(item, context: context)
    }

    /// Takes `item` in; whether it passed a part on to the router.
    @discardableResult
    private func take(_ item: Held, context: ChannelHandlerContext) -> Bool {
        switch item {
        case .part(let part):
            return self.receive(part, context: context)
        case .error(let error):
            // A send whose request breaks off is the router's to answer (a 400, then it closes).
            if case .reading = self.state { self.state = .idle }
            context.fireErrorCaught(error)
        case .event(let event):
            context.fireUserInboundEventTriggered(event)
        }
        return false
    }

    /// Takes a part in; whether it passed it on to the router.
    private func receive(_ part: Parts.RequestPart, context: ChannelHandlerContext) -> Bool {
        let classified = Parts.classify(part)
        switch self.state {
        case .idle:
            guard case .head(let head) = classified else {
                // Not the start of a request (the codec sends none such): the router's to refuse.
                context.fireChannelRead(self.wrapInboundOut(part))
                return true
            }
            guard let head else {
                self.state = .forwarding(requestEnded: false, answered: false)
                context.fireChannelRead(self.wrapInboundOut(part))
                return true
            }
            self.state = .reading(Send(head: head, body: context.channel.allocator.buffer(capacity: 0), started: .now))
        case .reading(var send):
            self.state = .idle  // so that `send.body` is uniquely referenced while it grows
            switch classified {
            case .head:
                // The codec never starts a request inside another; drop the broken one.
                context.close(promise: nil)
            case .body(let bytes):
                guard send.body.readableBytes + bytes.readableBytes <= HTTPFront.maximumBodySize else {
                    // Refused at once, not after reading all that the client announced.
                    send.isTooLarge = true
                    self.state = .answering(send)
                    self.apply(send, context: context)
                    break
                }
                send.body.writeImmutableBuffer(bytes)
                self.state = .reading(send)
            case .end:
                send.ended = true
                self.state = .answering(send)
                self.apply(send, context: context)
            }
        case .discarding:
            if case .end = classified { self.state = .idle }
        case .forwarding(false, let answered):
            if case .end = classified {
                self.state = answered ? .idle : .forwarding(requestEnded: true, answered: false)
            }
            context.fireChannelRead(self.wrapInboundOut(part))
            return true
        case .answering, .forwarding(true, _):
            self.held.append(.part(part))
        }
        return false
    }

    // MARK: - Outbound

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        // Only the router's answers come through here; this handler's own start below it.
        context.write(data, promise: promise)
        guard Parts.isEnd(self.unwrapOutboundIn(data)), case .forwarding(let requestEnded, _) = self.state else { return }
        guard requestEnded else {
            // Answered before its body was read (an error): the rest of the request still passes on.
            return self.state = .forwarding(requestEnded: false, answered: true)
        }
        self.state = .idle
        self.resume(context: context)
    }

    func read(context: ChannelHandlerContext) {
        // Reading goes on while a request is answered (the next one usually comes after its
        // answer; pausing would cost two `epoll_ctl`s a request); it pauses once something waits.
        guard self.held.isEmpty else { return self.readWithheld = true }
        context.read()
    }

    // MARK: - The send

    private func apply(_ send: Send, context: ChannelHandlerContext) {
        let applied: Engine.Applied<SendResult>
        do throws(FanoutError) {
            let project = try MessagesSend.authorize(
                project: send.head.project,
                authorization: send.head.authorization,
                googleAPIKey: send.head.googleAPIKey,
                keys: self.keys()
            )
            guard !send.isTooLarge else { throw HTTPFront.bodyTooLarge }
            applied = MessagesSend.apply(Array(send.body.readableBytesView), in: project, engine: self.engine)
        } catch {
            return self.answer(.failure(error), context: context)
        }
        if let result = applied.completedResult {
            return self.answer(result, context: context)
        }
        let handler = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        applied.whenDurable { result in
            handler.eventLoop.execute {
                let (handler, context) = handler.value
                handler.answer(result, context: context)
            }
        }
    }

    private func answer(_ result: Result<SendResult, FanoutError>, context: ChannelHandlerContext) {
        guard case .answering(let send) = self.state else { return }
        let status: Int, body: [UInt8], retryAfter: String?
        switch MessagesSend.answer(result) {
        case .success(let name): (status, body, retryAfter) = (200, name, nil)
        case .failure(let error): ((status, body), retryAfter) = (GoogleError.body(error), GoogleError.retryAfter(error))
        }
        let close = send.head.closesConnection
        let head = SendResponseHead(status: status, contentLength: body.count, date: self.date.now(), retryAfter: retryAfter, closesConnection: close)
        context.write(self.wrapOutboundOut(Parts.head(head)), promise: nil)
        context.write(self.wrapOutboundOut(Parts.body(context.channel.allocator.buffer(bytes: body))), promise: nil)
        context.writeAndFlush(self.wrapOutboundOut(Parts.end), promise: nil)
        self.metrics.answered(MessagesSend.operation, status: status, after: .now - send.started)
        self.state = send.ended ? .idle : .discarding
        if close {
            return context.close(promise: nil)
        }
        for event in self.eventsAfterAnswer.reversed() { self.held.prepend(.event(event)) }
        self.eventsAfterAnswer.removeAll()
        self.resume(context: context)
    }

    /// Takes up what waited while a request was answered, until one again must wait; then reads on.
    private func resume(context: ChannelHandlerContext) {
        var forwarded = false
        while !self.isHolding, let next = self.held.popFirst() {
            if self.take(next, context: context) { forwarded = true }
        }
        // The router's channel hands reads to its task at read-complete.
        if forwarded { context.fireChannelReadComplete() }
        if self.held.isEmpty, self.readWithheld {
            self.readWithheld = false
            context.read()
        }
    }
}
