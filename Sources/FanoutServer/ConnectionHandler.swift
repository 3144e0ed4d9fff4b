internal import FanoutCore
internal import FanoutKeys
internal import FanoutModel
internal import FanoutWire
internal import Logging
internal import NIOCore
internal import NIOPosix

/// What every connection of a server shares.
struct ConnectionSettings: Sendable {
    let executor: RequestExecutor
    let keys: KeyRing
    let welcome: Welcome
    let maximumInFlight: Int
    let logger: Logger
    /// The open device connections, told to check their credentials after changes that can revoke them.
    var devices = DeviceConnections()
    /// The handshake's limits and counters.
    var strangers: StrangerLimits
    /// Requests by operation and status, their latency, connections by role.
    let metrics: ServerMetrics
    /// A cluster node's routes to its shards' owners: requests go there instead of to `executor`'s engine.
    var router: ClusterRouter? = nil
}

/// A request being answered: its id, its opcode and when it arrived (for the request metrics).
struct Exchange {
    let id: UInt32
    let opcode: Opcode
    let started: NIODeadline
}

/// Serves one connection on its event loop (docs/wire-protocol.md). Each request is applied to the
/// engine as its frame is decoded, in the order received, with no hop to another thread; a request
/// that changed nothing is answered at once, and the replies of a read leave with the next flush.
/// A change's reply waits for the log without a task: the connection keeps it with the engine's
/// result (`WaitingReplies`), the log's writer wakes the connection once its batch is durable, and
/// the replies that batch released leave in one write, in the order the changes were applied. A
/// reply another thread answers (a cluster's shards, a snapshot) comes back through
/// `RepliesFromOtherThreads` with its number and waits for its turn likewise. A consumer's
/// deliveries are written as the engine hands them out, in batches, while the socket takes them.
/// Frames are encoded here, into one buffer per flush: the socket gets one write for all the
/// replies and deliveries of a turn of the event loop, not one trip through the pipeline each.
///
/// Past `maximumInFlight` replies waiting (for the log, or a snapshot) the connection is not read
/// until some leave. The input ends when the peer shuts its side, a frame is malformed, or a
/// graceful shutdown or a revoked key stops reading (`ConnectionGuardHandler.StopReading`): the
/// replies of what was applied go out, then GOAWAY (on a stop) and the close.
final class ConnectionHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// Deliveries written per batch (on ATTACH_GROUPED, one DELIVERIES frame unless the frame
    /// limit splits it); the next batch is taken on a later turn of the event loop. 1024, not
    /// 256: a worker acknowledging each frame with a few ACKs in flight kept less of its credit
    /// busy across the log's syncs (`fanout-load run send-topic`: 1.17x deliveries per second);
    /// 2048, not 1024: a worker then pays its per-frame costs (a wake-up, a batch joined from
    /// frames, an ACK) half as often (its CPU per delivery -20%, deliveries per second +13%).
    static let deliveryBatch = 2048
    /// The capacities of output buffers kept for the next output (`spareOutput`).
    static let spareOutputCapacity = (16 << 10)...(4 << 20)

    private let settings: ConnectionSettings
    private var state: ConnectionState
    /// The socket's bytes, decoded into requests here.
    private var requests: FrameReader<ClientRequest>
    /// Requests are being handled (a read that comes meanwhile only joins `requests`).
    private var isHandlingRequests = false
    /// When a frame begun and not whole yet makes the connection idle. The `IdleStateHandler` in
    /// front sees the socket's reads, not frames: a peer trickling the bytes of a frame that never
    /// ends would keep it quiet. So a frame must come whole within the idle timeout of its first
    /// bytes, or the guard is told the connection is idle (GOAWAY, then the close).
    private var unfinishedFrameDeadline: Scheduled<Void>?
    private var attachment: (source: DeliverySource, requestID: UInt32, grouped: Bool)?
    private let repliesFromOtherThreads = RepliesFromOtherThreads()
    /// The replies of applied changes in the order applied, each with its exchange. They leave
    /// from the front, in order.
    private var waitingReplies = WaitingReplies()
    /// Whether the log will wake the connection (`Engine.Applied.whenLogged`): a reply kept with
    /// its changes waits on the log, and one wait covers every change applied before it.
    private var watchingLog = false
    /// Replies waiting for the log or a snapshot.
    private var inFlight = 0
    /// A read the channel asked for, held while `inFlight` is at its maximum.
    private var readHeld = false
    /// Set once the input has ended: how the connection ends when nothing is in flight.
    private var ending: ConnectionState.Ending? {
        didSet { self.inputEnded = self.ending != nil }
    }
    /// Whether `ending` is set: read for every frame, where comparing `ending` with nil copied it.
    private var inputEnded = false
    private var isClosing = false
    /// Frames encoded since the last flush.
    private var output: ByteBuffer?
    /// The last flushed output's buffer, cleared and written into again by the next output once
    /// the socket has taken it (`ByteBuffer.clear()` allocates afresh while the channel still
    /// holds it). A consumer's poll of deliveries runs to hundreds of KiB; a new buffer for each,
    /// grown by doubling, copies it several times and faults in every page of it again, since
    /// glibc gives such blocks back when they are freed. Only a buffer whose capacity is in
    /// `spareOutputCapacity` is kept: a smaller one comes cheaply from the allocator's free
    /// lists, and a larger one would be held for the rest of the connection.
    private var spareOutput: ByteBuffer?
    /// A delivery pump is scheduled or waiting for the sink's call.
    private var pumpScheduled = false
    /// A device connection's end when its auth token expires.
    private var expiry: Scheduled<Void>?
    /// The close of a connection that has not finished HELLO in time; nil once it has (or never admitted).
    private var handshakeDeadline: Scheduled<Void>?
    /// Whether this connection counts among those that have not finished HELLO.
    private var awaitingHandshake = false
    /// The role this connection counts under in the connection metrics, once welcomed.
    private var countedRole: Permissions.Principal?

    init(settings: ConnectionSettings) {
        self.settings = settings
        self.requests = FrameReader(maximumPayloadSize: settings.executor.maximumPayloadSize)
        self.state = ConnectionState(keys: settings.keys.current, welcome: settings.welcome, tokens: settings.executor.tokens, clock: settings.executor.engine.clock)
    }

    private var engine: Engine { self.settings.executor.engine }

    /// The engine a device's credential and scope are checked against: on a cluster node, the
    /// node's copy of the device's shard (a moment behind its owner at most).
    private func engine(of principal: Principal) -> Engine {
        guard let router = self.settings.router, let (_, fid) = principal.installation else { return self.engine }
        return router.localEngine(of: fid) ?? self.engine
    }

    // MARK: - Input

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !self.inputEnded else { return }
        var bytes = Self.unwrapInboundIn(data)
        self.requests.append(&bytes)
        if self.handleRequests(seenEOF: false, context: context) > 0 {
            self.unfinishedFrameDeadline?.cancel()  // a frame came whole: what is left starts anew
            self.unfinishedFrameDeadline = nil
        }
        if self.requests.hasUnread, !self.inputEnded, self.unfinishedFrameDeadline == nil {
            let idleTimeout = TimeAmount.milliseconds(Int64(self.settings.welcome.idleTimeoutMilliseconds))
            self.unfinishedFrameDeadline = context.eventLoop.assumeIsolated().scheduleTask(in: idleTimeout) {
                guard !self.inputEnded, !self.isClosing else { return }
                context.pipeline.fireUserInboundEventTriggered(IdleStateHandler.IdleStateEvent.read)
            }
        }
    }

    /// Handles every whole request that has come, in order, until the input ends; at the end of
    /// the input (`seenEOF`) a frame cut short is a protocol error. How many it handled.
    @discardableResult
    private func handleRequests(seenEOF: Bool, context: ChannelHandlerContext) -> Int {
        guard !self.isHandlingRequests else { return 0 }  // the loop below takes what was added
        self.isHandlingRequests = true
        defer { self.isHandlingRequests = false }
        var handled = 0
        while !self.inputEnded {
            let frame: ClientFrame?
            do {
                frame = try self.requests.nextRequest(seenEOF: seenEOF)
            } catch {
                self.errorCaught(context: context, error: error)
                break
            }
            guard let frame = consume frame else { break }  // moved out of the optional, not copied
            self.handle(frame, context: context)
            handled += 1
        }
        return handled
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.flushIfNeeded(context: context)
    }

    /// Reads are held while too many replies wait, or while the socket takes no more output (a
    /// peer that pipelines without reading its replies).
    func read(context: ChannelHandlerContext) {
        if self.inFlight >= self.settings.maximumInFlight || !context.channel.isWritable {
            self.readHeld = true
        } else {
            context.read()
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case let stop as ConnectionGuardHandler.StopReading:
            self.endInput(goAway: stop.goAway, context: context)
        case ChannelEvent.inputClosed:
            if !self.inputEnded, self.requests.hasUnread {
                self.handleRequests(seenEOF: true, context: context)  // a frame cut short is an error
            }
            self.endInput(goAway: nil, context: context)
        case is DeviceConnections.Recheck:
            if let principal = self.state.principal, !DeviceScope.isLive(principal, engine: self.engine(of: principal)) {
                context.pipeline.fireUserInboundEventTriggered(ConnectionGuardHandler.StopReading(goAway: .goAway(DeviceScope.revoked.code, DeviceScope.revoked.message)))
            }
        case let reload as KeyRing.Reloaded:
            // From the head of the pipeline, so that the guard stops reading first.
            if let goAway = self.state.keysReloaded(reload.keys) {
                context.pipeline.fireUserInboundEventTriggered(ConnectionGuardHandler.StopReading(goAway: goAway))
            }
        default:
            context.fireUserInboundEventTriggered(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let error = error as? ProtocolError {
            // A malformed frame: say so, then end as if the peer had closed (what was applied is
            // answered). Nothing after it is read, so a later error says nothing new.
            guard !self.inputEnded else { return }
            self.settings.logger.debug("protocol error", metadata: ["error": "\(error)"])
            self.write(ServerFrame(requestID: error.requestID, message: .error(error.fanoutError)), context: context)
            self.endInput(goAway: nil, context: context)
            return
        }
        self.settings.logger.debug("connection ended", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            self.releaseHeldRead(context: context)
            self.pumpDeliveries(context: context)
        }
        context.fireChannelWritabilityChanged()
    }

    func channelActive(context: ChannelHandlerContext) {
        guard self.settings.strangers.admit() else {
            self.isClosing = true
            context.close(promise: nil)
            return
        }
        self.awaitingHandshake = true
        let strangers = self.settings.strangers
        self.handshakeDeadline = context.eventLoop.assumeIsolated().scheduleTask(in: strangers.configuration.handshakeTimeout) {
            strangers.handshakeTimedOut()
            let exchange = Exchange(id: 0, opcode: .hello, started: .now())
            self.handle(.fail(.error(FanoutError(.unauthenticated, "HELLO did not come in time"))), exchange: exchange, context: context)
        }
        context.fireChannelActive()
    }

    /// HELLO is over (welcomed, or the connection ends): the connection stops counting as a stranger.
    private func handshakeEnded() {
        self.handshakeDeadline?.cancel()
        self.handshakeDeadline = nil
        if self.awaitingHandshake {
            self.awaitingHandshake = false
            self.settings.strangers.handshakeEnded()
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.handshakeEnded()
        self.isClosing = true
        self.expiry?.cancel()
        self.expiry = nil
        self.unfinishedFrameDeadline?.cancel()
        self.unfinishedFrameDeadline = nil
        self.settings.devices.remove(context.channel)
        self.attachment?.source.detach()
        self.attachment = nil
        if let role = self.countedRole {
            self.settings.metrics.connection(role, opened: false)
            self.countedRole = nil
        }
        context.fireChannelInactive()
    }

    /// Every action answers in the order received, except the engine's changes (answered once
    /// durable) and SNAPSHOT (answered when written).
    private func handle(_ frame: consuming ClientFrame, context: ChannelHandlerContext) {
        let exchange = Exchange(id: frame.requestID, opcode: frame.request.opcode, started: .now())
        // The request is moved into the action, not copied (a registration's is a dozen retains).
        self.handle(self.state.receive((consume frame).request), exchange: exchange, context: context)
    }

    private func handle(_ action: ConnectionState.Action, exchange: Exchange, context: ChannelHandlerContext) {
        switch action {
        case .verify(let principal):
            let live = DeviceScope.isLive(principal, engine: self.engine(of: principal))
            if !live, self.settings.router != nil, exchange.started + .seconds(2) > .now() {
                // A cluster node's copy of the shard may not hold credentials issued a moment
                // ago on the owner yet: looked at again every 20 ms, for 2 s.
                context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(20)) {
                    guard !self.isClosing else { return }
                    self.handle(action, exchange: exchange, context: context)
                    self.flushIfNeeded(context: context)
                    self.afterReplies(context: context)
                }
                return
            }
            if live, let (project, _) = principal.installation {
                self.settings.devices.add(context.channel, project: project)
                if let expiresAt = principal.expiresAt {
                    let remaining = max(0, expiresAt - self.state.seconds)
                    self.expiry = context.eventLoop.assumeIsolated().scheduleTask(in: .seconds(remaining)) {
                        context.pipeline.fireUserInboundEventTriggered(ConnectionGuardHandler.StopReading(goAway: .goAway(.unauthenticated, "the auth token has expired")))
                    }
                }
            }
            self.handle(self.state.verified(live), exchange: exchange, context: context)
        case .reply(let message):
            if case .welcome = message {
                self.handshakeEnded()
                if let role = self.state.principal?.kind {
                    self.settings.metrics.connection(role, opened: true)
                    self.countedRole = role
                }
            }
            self.reply(exchange, message, context: context)
        case .fail(let message):
            guard !self.isClosing else { return }
            self.ending = ConnectionState.Ending(detach: true, goAway: nil)
            self.attachment?.source.detach()
            self.attachment = nil
            // A refused HELLO is answered later the more its address failed lately (a brute force slows down).
            var delay = TimeAmount.zero
            if self.awaitingHandshake, case .error(let error) = message, error.code == .unauthenticated {
                self.handshakeDeadline?.cancel()
                delay = self.settings.strangers.authenticationFailed(from: context.channel.remoteAddress?.ipAddress ?? "?")
            }
            let write = {
                self.reply(exchange, message, context: context)
                self.isClosing = true
                self.flush(context: context).whenComplete { _ in context.close(promise: nil) }
            }
            if delay > .zero {
                context.eventLoop.assumeIsolated().scheduleTask(in: delay, write)
            } else {
                write()
            }
        case .perform(let request):
            guard let principal = self.state.principal else { return }
            if principal.installation != nil {
                guard DeviceScope.isLive(principal, engine: self.engine(of: principal)) else {
                    self.handle(.fail(.error(DeviceScope.revoked)), exchange: exchange, context: context)
                    return
                }
                do throws(FanoutError) {
                    try DeviceScope.check(request, of: principal, engine: self.engine(of: principal))
                } catch {
                    self.reply(exchange, .error(error), context: context)
                    return
                }
            }
            if let router = self.settings.router {
                // A cluster node: the request goes to the shards it touches.
                self.answer(exchange, whenDone: { done in
                    Task { done(.success(await router.perform(request, principal: principal))) }
                }, context: context)
                return
            }
            let executor = self.settings.executor
            self.answer(exchange, self.engine.apply { (changes: inout Engine.Changes) throws(FanoutError) -> ServerMessage in
                try executor.execute(request, principal: principal, changes: &changes)
            }, context: context)
            // Changes that can revoke installation credentials: open device connections check theirs.
            switch request {
            case .deleteInstallation(let project, _), .deleteProject(let project), .pruneExpired(let project), .issueCredentials(let project, _),
                .register(let project, _, issuingCredentials: true):
                self.settings.devices.recheck(project: project)
            default:
                break
            }
        case .acknowledge(let ids):
            switch self.attachment?.source {
            case .engine(let consumer):
                self.answer(exchange, self.engine.apply { (changes: inout Engine.Changes) throws(FanoutError) -> ServerMessage in
                    .count(.acknowledge, UInt64(try changes.acknowledge(ids, by: consumer)))
                }, context: context)
            case .cluster(let consumer):
                self.answer(exchange, whenDone: { done in
                    consumer.acknowledge(ids) { result in done(result.map { .count(.acknowledge, UInt64($0)) }) }
                }, context: context)
            case nil:
                self.reply(exchange, .error(FanoutError(.internal, "no consumer for the attachment")), context: context)
            }
        case .attach(let project, let scope, let credit, let grouped):
            do throws(FanoutError) {
                let source: DeliverySource
                if let principal = self.state.principal {
                    try DeviceScope.check(.attach(project: project, scope: scope, credit: UInt32(credit), grouped: grouped), of: principal, engine: self.engine(of: principal))
                }
                if let router = self.settings.router {
                    source = .cluster(try router.attach(scope, credit: Int(credit), in: project))
                } else {
                    source = .engine(try self.engine.attachConsumer(
                        try RequestExecutor.scope(scope),
                        credit: credit,
                        in: try RequestExecutor.project(project)
                    ))
                }
                self.attachment = (source, exchange.id, grouped)
                self.state.attached(credit: credit)
                self.reply(exchange, .done(grouped ? .attachGrouped : .attach), context: context)
                self.pumpDeliveries(context: context)
            } catch {
                self.reply(exchange, .error(error), context: context)
            }
        case .grant(let credit):
            do throws(FanoutError) {
                try self.attachment?.source.grant(credit)
                self.state.granted(credit)
                self.reply(exchange, .done(.grant), context: context)
            } catch {
                self.reply(exchange, .error(error), context: context)
            }
        case .detach:
            self.attachment?.source.detach()
            self.attachment = nil
            self.reply(exchange, .done(.detach), context: context)
        case .snapshot:
            // File I/O for seconds: on the NIO thread pool, answered when written. A cluster node
            // snapshots each of its shards (owners publish theirs): `shard-N/<file name>` each.
            let engine = self.engine
            let router = self.settings.router
            self.inFlight += 1
            NIOThreadPool.singleton.runIfActive(eventLoop: context.eventLoop) { () throws -> [String] in
                // The file's name, not the server's path to it.
                try router?.snapshot() ?? [String(try engine.snapshot().split(separator: "/").last ?? "")]
            }
                .assumeIsolated()
                .whenComplete { result in
                    let reply: ServerMessage
                    switch result {
                    case .success(let names):
                        reply = .names(.snapshot, names)
                    case .failure(let error as FanoutError):
                        reply = .error(error)
                    case .failure:
                        reply = .error(FanoutError(.unavailable, "the snapshot could not be written"))
                    }
                    self.inFlight -= 1
                    self.reply(exchange, reply, context: context)
                    self.flushIfNeeded(context: context)
                    self.afterReplies(context: context)
                }
        }
    }

    // MARK: - Replies

    /// Answers an applied request: at once when nothing waits for the log, else once the log
    /// has made it durable, from this event loop. The reply waits here with its changes, not in
    /// a callback of its own: the log wakes the connection once for all the replies its batch
    /// released (`watchLog`), and each is encoded from the engine's result in place.
    private func answer(_ exchange: Exchange, _ applied: consuming Engine.Applied<ServerMessage>, context: ChannelHandlerContext) {
        guard applied.isDurable else {
            self.inFlight += 1
            if !self.watchingLog { self.watchLog(applied, context: context) }
            self.waitingReplies.append(.logged(applied), answering: exchange)
            return
        }
        self.reply(exchange, applied, context: context)
    }

    /// Answers `exchange` with the engine's result or error, encoded in place (a copy of a reply
    /// holding an installation was a dozen retains and releases).
    private func reply(_ exchange: Exchange, _ applied: borrowing Engine.Applied<ServerMessage>, context: ChannelHandlerContext) {
        switch applied.outcome {
        case .success(let message): self.reply(exchange, message, context: context)
        case .failure(let error): self.reply(exchange, .error(error), context: context)
        }
    }

    /// Has the log wake the connection once `applied`'s changes (and every change before them)
    /// are durable or refused; the waiting replies then leave (`writeDurableReplies`).
    private func watchLog(_ applied: Engine.Applied<ServerMessage>, context: ChannelHandlerContext) {
        self.watchingLog = true
        let handler = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        applied.whenLogged {
            handler.eventLoop.execute {
                let (handler, context) = handler.value
                handler.watchingLog = false
                handler.writeDurableReplies(context: context)
            }
        }
    }

    /// Answers `exchange` in its turn once `whenDone` calls back (on any thread) with the reply.
    private func answer(
        _ exchange: Exchange,
        whenDone: (@escaping @Sendable (Result<ServerMessage, FanoutError>) -> Void) -> Void,
        context: ChannelHandlerContext
    ) {
        self.inFlight += 1
        let number = self.waitingReplies.nextNumber
        let id = exchange.id
        self.waitingReplies.append(.answeredElsewhere(nil), answering: exchange)
        let replies = self.repliesFromOtherThreads
        let handler = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        whenDone { result in
            guard replies.append(number, ServerFrame(requestID: id, message: Self.message(result))) else { return }
            handler.eventLoop.execute {
                let (handler, context) = handler.value
                handler.writeDurableReplies(context: context)
            }
        }
    }

    private static func message(_ result: Result<ServerMessage, FanoutError>) -> ServerMessage {
        switch result {
        case .success(let message): return message
        case .failure(let error): return .error(error)
        }
    }

    /// Writes, in order and with one flush, the replies that are ready (their changes durable,
    /// or their callbacks in) and that no earlier reply still waits in front of. When the first
    /// reply left waits on the log, the log is asked to wake the connection for it.
    private func writeDurableReplies(context: ChannelHandlerContext) {
        // Each frame is moved, never copied, from its callback to the output (a copy of a
        // registration's reply is a dozen retains and releases).
        var answered = self.repliesFromOtherThreads.takeAll()
        for index in answered.indices {
            if let frame = answered[index].frame.take() { self.waitingReplies.answer(answered[index].number, with: frame) }
        }
        // Each reply is taken out to be looked at, and put back if it must wait (a look in
        // place copied the engine's result).
        while let first = self.waitingReplies.takeFirst() {
            switch consume first {
            case .answeredElsewhere(nil):
                self.waitingReplies.putBackFirst(.answeredElsewhere(nil))
                return self.repliesWritten(context: context)
            case .answeredElsewhere(let frame?):
                self.count(self.replyLeft(), frame.message)
                self.write(frame, context: context)
            case .logged(let applied):
                switch applied.logOutcome() {
                case nil:
                    if !self.watchingLog { self.watchLog(applied, context: context) }
                    self.waitingReplies.putBackFirst(.logged(applied))
                    return self.repliesWritten(context: context)
                case .acknowledged:
                    self.reply(self.replyLeft(), applied, context: context)
                case .refused(let refusal):
                    self.reply(self.replyLeft(), .error(refusal), context: context)
                }
            }
        }
        self.repliesWritten(context: context)
    }

    /// The exchange of the waiting reply just taken from the front, which leaves now.
    private func replyLeft() -> Exchange {
        self.inFlight -= 1
        return self.waitingReplies.removeFirst()
    }

    /// Flushes what `writeDurableReplies` wrote and goes on with what waited for it.
    private func repliesWritten(context: ChannelHandlerContext) {
        self.flushIfNeeded(context: context)
        self.afterReplies(context: context)
    }

    /// Answers `exchange`'s request with `message`, counting it in the request metrics.
    private func reply(_ exchange: Exchange, _ message: borrowing ServerMessage, context: ChannelHandlerContext) {
        self.count(exchange, message)
        self.write(requestID: exchange.id, message, context: context)
    }

    private func count(_ exchange: Exchange, _ message: borrowing ServerMessage) {
        let error: FanoutError.Code? =
            switch message {
            case .error(let refusal): refusal.code
            default: nil
            }
        self.settings.metrics.answered(exchange.opcode, error: error, nanoseconds: Int64((NIODeadline.now() - exchange.started).nanoseconds))
    }

    /// Encodes `frame` into the output; a reply too large for a frame is answered with the error.
    private func write(_ frame: ServerFrame, context: ChannelHandlerContext) {
        self.write(requestID: frame.requestID, frame.message, context: context)
    }

    /// Encodes the frame of `message` in place (without a frame holding a copy of the message).
    private func write(requestID: UInt32, _ message: borrowing ServerMessage, context: ChannelHandlerContext) {
        self.encode(requestID: requestID, context: context) { (output: inout ByteBuffer, maximum: Int) throws(ProtocolError) in
            try ServerFrame.encode(requestID: requestID, message, into: &output, maximumPayloadSize: maximum)
        }
    }

    /// Appends what `body` encodes to the output; when it refuses (a frame too large), the error
    /// in its place (`body` leaves nothing of a refused frame behind, and an error frame fits).
    private func encode(
        requestID: UInt32,
        context: ChannelHandlerContext,
        _ body: (inout ByteBuffer, Int) throws(ProtocolError) -> Void
    ) {
        guard !self.isClosing else { return }
        var output = self.output ?? self.freshOutput(context: context)
        self.output = nil
        let maximum = self.settings.executor.maximumPayloadSize
        do {
            try body(&output, maximum)
        } catch {
            try? ServerFrame(requestID: requestID, message: .error(error.fanoutError)).encode(into: &output, maximumPayloadSize: maximum)
        }
        self.output = output
    }

    /// The spare output buffer, cleared, or a new one.
    private func freshOutput(context: ChannelHandlerContext) -> ByteBuffer {
        guard var spare = self.spareOutput else { return context.channel.allocator.buffer(capacity: 512) }
        self.spareOutput = nil
        spare.clear()
        return spare
    }

    /// Writes and flushes `output`, keeping its buffer as the spare when it is large enough to be worth it.
    private func writeAndFlush(_ output: ByteBuffer, context: ChannelHandlerContext, promise: EventLoopPromise<Void>?) {
        context.writeAndFlush(Self.wrapOutboundOut(output), promise: promise)
        if Self.spareOutputCapacity.contains(output.capacity) {
            self.spareOutput = output
        }
    }

    private func flushIfNeeded(context: ChannelHandlerContext) {
        guard let output = self.output else { return }
        self.output = nil
        self.writeAndFlush(output, context: context, promise: nil)
    }

    /// Writes the output and flushes; the future completes when it is written.
    private func flush(context: ChannelHandlerContext) -> EventLoopFuture<Void>.Isolated {
        let promise = context.eventLoop.makePromise(of: Void.self)
        if let output = self.output {
            self.output = nil
            self.writeAndFlush(output, context: context, promise: promise)
        } else {
            context.flush()
            promise.succeed()
        }
        return promise.futureResult.assumeIsolated()
    }

    /// Replies left: reads may go on again, or the connection may end.
    private func afterReplies(context: ChannelHandlerContext) {
        self.releaseHeldRead(context: context)
        self.finishIfDone(context: context)
    }

    private func releaseHeldRead(context: ChannelHandlerContext) {
        guard self.readHeld, self.inFlight < self.settings.maximumInFlight, context.channel.isWritable else { return }
        self.readHeld = false
        context.read()
    }

    // MARK: - The end

    private func endInput(goAway: ServerMessage?, context: ChannelHandlerContext) {
        guard !self.inputEnded else { return }
        let ending = self.state.inputEnded(goAway: goAway)
        self.ending = ending
        if ending.detach {
            self.attachment?.source.detach()
            self.attachment = nil
        }
        self.flushIfNeeded(context: context)
        self.finishIfDone(context: context)
    }

    /// Once the input has ended and every reply is out: GOAWAY and a lingering close after a
    /// graceful shutdown (see `ConnectionGuardHandler`), else the close.
    private func finishIfDone(context: ChannelHandlerContext) {
        guard let ending = self.ending, self.inFlight == 0, !self.isClosing else { return }
        if let goAway = ending.goAway {
            self.write(ServerFrame(requestID: 0, message: goAway), context: context)
        }
        self.isClosing = true
        let lingering = ending.goAway != nil
        self.flush(context: context).whenComplete { _ in
            context.close(mode: lingering ? .output : .all, promise: nil)
        }
    }

    // MARK: - Deliveries

    /// Writes what the consumer has been handed, a batch per turn of the loop while the socket
    /// takes it; when nothing is left, asks the consumer to call back when more arrives.
    private func pumpDeliveries(context: ChannelHandlerContext) {
        guard let (source, attachID, grouped) = self.attachment, !self.pumpScheduled, !self.isClosing else { return }
        guard context.channel.isWritable else { return }  // resumed by `channelWritabilityChanged`
        let handler = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let ready: @Sendable () -> Void = {
            handler.eventLoop.execute {
                let (handler, context) = handler.value
                handler.pumpScheduled = false
                handler.pumpDeliveries(context: context)
            }
        }
        let count = switch source {
        case .engine(let consumer):
            // Slices of the engine's hand-outs, written without joining them (none copied).
            self.write(consumer.pollSlices(maximum: Self.deliveryBatch, orWhenReady: ready).slices, attachID: attachID, grouped: grouped, context: context)
        case .cluster(let consumer):
            self.write([consumer.poll(maximum: Self.deliveryBatch, orWhenReady: ready)[...]], attachID: attachID, grouped: grouped, context: context)
        }
        guard count > 0 else {
            self.pumpScheduled = true  // until the consumer calls back (never, once it has ended)
            return
        }
        self.flushIfNeeded(context: context)
        self.pumpScheduled = true
        context.eventLoop.assumeIsolated().execute {
            self.pumpScheduled = false
            self.pumpDeliveries(context: context)
        }
    }

    /// Writes `chunks` (a poll's deliveries, in the slices they came in) for the attachment
    /// `attachID`: as DELIVERIES frames grouped across the slices when it is `grouped`, and
    /// otherwise a DELIVERY frame each; how many.
    private func write(_ chunks: [ArraySlice<some DeliveryFrameFields>], attachID: UInt32, grouped: Bool, context: ChannelHandlerContext) -> Int {
        let count = chunks.reduce(0) { $0 + $1.count }
        if grouped, count > 0 {
            self.encode(requestID: attachID, context: context) { (output: inout ByteBuffer, maximum: Int) in
                output.writeDeliveriesFrames(attachID: attachID, chunks: chunks, maximumPayloadSize: maximum)
            }
            return count
        }
        for delivery in chunks.joined() {
            self.encode(requestID: attachID, context: context) { (output: inout ByteBuffer, maximum: Int) throws(ProtocolError) in
                try output.writeDeliveryFrame(attachID: attachID, delivery, maximumPayloadSize: maximum)
            }
        }
        return count
    }
}

@available(*, unavailable)
extension ConnectionHandler: Sendable {}

/// Replies answered on other threads (a cluster's shards, a snapshot), with their numbers in the
/// connection's order, handed to the event loop. The first of a batch schedules one drain on the
/// loop, which writes them, in their turn, with one flush.
final class RepliesFromOtherThreads: Sendable {
    /// Optional frames (each is there) so that the drain can swap them into place, not copy them.
    private let frames = Locked<[(number: UInt64, frame: ServerFrame?)]>([])

    /// Adds a reply; true when the caller should schedule the drain (there was none waiting).
    func append(_ number: UInt64, _ frame: consuming ServerFrame) -> Bool {
        var frame = Optional(frame)
        return self.frames.withLock { frames in
            frames.append((number, frame.take()))  // moved in, not copied
            return frames.count == 1
        }
    }

    func takeAll() -> [(number: UInt64, frame: ServerFrame?)] {
        self.frames.withLock { frames in
            var taken: [(number: UInt64, frame: ServerFrame?)] = []
            swap(&taken, &frames)
            return taken
        }
    }
}
