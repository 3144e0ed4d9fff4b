internal import FanoutCluster
internal import FanoutCore
internal import FanoutModel
internal import FanoutWire
internal import NIOCore
internal import NIOPosix

/// The owner's side of the consumers other nodes attach to the shards this node owns
/// (docs/scale-out.md, "Consumers"): a worker connected to another node receives this node's
/// shards' deliveries through them.
///
/// The other node (the edge) sends each call as a request on `fanout.consumers.shard.N`, which
/// only the shard's owner subscribes to: the consumer's id, then an ATTACH, GRANT, ACK, DETACH or
/// PING frame (docs/wire-protocol.md), answered with the frame a node would answer it with. An
/// attached consumer is an engine consumer of the shard with the edge's credit; what it hands out
/// is published to `fanout.deliveries.<id>`, a PENDING frame of up to 64 deliveries at a time whose
/// request id counts the messages (1, 2, ...), so that the edge sees a message lost; a DETACH
/// reply frame there ends it. A consumer ends when the edge detaches, when this node stops owning
/// the shard, or when the edge has said nothing for two leases (its node died): what it held
/// unacknowledged is handed out again (at least once). Nothing is handed out while the shard's
/// lease, as this node last renewed it, has run out (`ServedShard.holdsItsLease`).
final class ShardConsumers: Sendable {
    private let node: ClusterNode
    private let maximumPayloadSize: Int
    /// Where every consumer's work runs, one call at a time.
    private let loop: any EventLoop
    /// One subscription per shard this node owns.
    private let subjects: OwnedShardSubjects
    /// The consumers by id; touched on `loop` only.
    private let consumers: NIOLoopBoundBox<[String: Remote]>

    /// One edge's consumer of one shard.
    private final class Remote {
        let shard: Int
        let engine: Engine
        let consumer: DeliveryConsumer
        let inbox: String
        var published: UInt32 = 0
        var lastHeard = ContinuousClock.now

        init(shard: Int, engine: Engine, consumer: DeliveryConsumer, inbox: String) {
            (self.shard, self.engine, self.consumer, self.inbox) = (shard, engine, consumer, inbox)
        }
    }

    /// Deliveries taken at once for the edge (sent in one message when they fit in one).
    static let batch = 64

    init(node: ClusterNode, maximumPayloadSize: Int, loop: any EventLoop = MultiThreadedEventLoopGroup.singleton.next()) {
        self.node = node
        self.maximumPayloadSize = maximumPayloadSize
        self.loop = loop
        self.subjects = OwnedShardSubjects(node: node, subject: Self.subject)
        self.consumers = NIOLoopBoundBox.makeBoxSendingValue([:], eventLoop: loop)
    }

    static func subject(_ shard: Int) -> String { "fanout.consumers.shard.\(shard)" }
    static func inbox(_ id: String) -> String { "fanout.deliveries.\(id)" }

    /// The answer to a call about a consumer this node does not hold (never attached here, or
    /// ended): the edge attaches again, to the shard's owner now.
    static func unknown(_ id: String) -> FanoutError {
        FanoutError(.notFound, "no consumer \(id) here: attach again", field: "consumer")
    }

    /// A call as the edge sends it: the consumer's id (1 byte of length, then the id), then the frame.
    static func call(_ id: String, _ request: ClientRequest, maximumPayloadSize: Int) throws(FanoutError) -> [UInt8] {
        var buffer = ByteBuffer()
        buffer.writeInteger(UInt8(clamping: id.utf8.count))
        buffer.writeString(id)
        do {
            try ClientFrame(requestID: 0, request: request).encode(into: &buffer, maximumPayloadSize: maximumPayloadSize)
        } catch {
            throw error.fanoutError
        }
        return Array(buffer.readableBytesView)
    }

    // MARK: - Ownership

    /// After the node's turn: answers the calls of the shards it owns now, ends the consumers of
    /// the shards it no longer owns, and those whose edge has been silent for two leases.
    func followOwnership() {
        self.subjects.follow { [weak self] message, shard in self?.handle(message, shard: shard) }
        let owned = self.node.ownedShards
        let silence = self.node.lease * 2
        self.loop.execute {
            let now = ContinuousClock.now
            for (id, remote) in self.consumers.value where !owned.contains(remote.shard) || now - remote.lastHeard > silence {
                self.end(id)
            }
            for id in Array(self.consumers.value.keys) { self.pump(id) }  // held back by a lease in doubt
        }
    }

    /// Stops answering, and ends every consumer.
    func stop() {
        self.subjects.stop()
        self.loop.execute {
            for id in Array(self.consumers.value.keys) { self.end(id) }
        }
    }

    // MARK: - Calls

    private func handle(_ message: NATSSubscription.Message, shard: Int) {
        guard let reply = message.reply else { return }
        let respond = OwnedShardSubjects.responder(to: reply, node: self.node, maximumPayloadSize: self.maximumPayloadSize)
        var buffer = ByteBuffer(bytes: message.data)
        var decoder = FrameDecoder<ClientRequest>(maximumPayloadSize: self.maximumPayloadSize)
        guard let length = buffer.readInteger(as: UInt8.self), let id = buffer.readString(length: Int(length)), !id.isEmpty,
            let frame = try? decoder.decode(buffer: &buffer), buffer.readableBytes == 0
        else {
            respond(.error(FanoutError(.invalidArgument, "a consumer's call is not an id and one request frame")))
            return
        }
        self.loop.execute {
            self.perform(frame.request, for: id, shard: shard, respond: respond)
        }
    }

    /// On `loop`.
    private func perform(_ request: ClientRequest, for id: String, shard: Int, respond: @escaping @Sendable (ServerMessage) -> Void) {
        if case .attach(let project, let scope, let credit, _) = request {
            let served = self.node.served(shard)
            guard served.isOwner else { return respond(.error(ShardRequests.notOwnedHere(shard))) }
            do throws(FanoutError) {
                let consumer = try served.engine.attachConsumer(try RequestExecutor.scope(scope), credit: Int(credit), in: try RequestExecutor.project(project))
                if self.consumers.value[id] != nil { self.end(id, tellingTheEdge: false) }  // attached again: the old one goes
                self.consumers.value[id] = Remote(shard: shard, engine: served.engine, consumer: consumer, inbox: Self.inbox(id))
                respond(.done(.attach))
                self.pump(id)
            } catch {
                respond(.error(served.engine.refusedAttachAsClosed(error) ? ShardRequests.notOwnedHere(shard) : error))
            }
            return
        }
        guard let remote = self.consumers.value[id], remote.shard == shard else { return respond(.error(Self.unknown(id))) }
        remote.lastHeard = .now
        switch request {
        case .ping:
            respond(.pong)
        case .grant(let credit):
            do throws(FanoutError) {
                try remote.consumer.grant(Int(credit))
                respond(.done(.grant))
            } catch {
                respond(.error(error))
            }
        case .acknowledge(let ids):
            let consumer = remote.consumer
            remote.engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in try changes.acknowledge(ids, by: consumer) }.whenDurable { result in
                switch result {
                case .success(let count): respond(.count(.acknowledge, UInt64(count)))
                case .failure(let error): respond(.error(error))
                }
            }
        case .detach:
            self.end(id, tellingTheEdge: false)
            respond(.done(.detach))
        default:
            respond(.error(FanoutError(.invalidArgument, "\(request.opcode) is not a consumer's call")))
        }
    }

    // MARK: - Deliveries

    /// Publishes what the consumer hands out until it has nothing; it calls back when it has more.
    /// On `loop`.
    private func pump(_ id: String) {
        // Nothing while the lease may have run out unnoticed (the next turn's renewal pumps again).
        guard let remote = self.consumers.value[id], self.node.served(remote.shard).holdsItsLease else { return }
        while true {
            let (deliveries, finished) = remote.consumer.poll(maximum: Self.batch) { [loop = self.loop] in
                loop.execute { self.pump(id) }
            }
            if finished && deliveries.isEmpty { return self.end(id) }  // its engine closed
            guard !deliveries.isEmpty else { return }
            self.publish(deliveries.map(WireDelivery.init), to: remote)
        }
    }

    /// Publishes `deliveries` in one message, or in halves when they do not fit in one.
    private func publish(_ deliveries: [WireDelivery], to remote: Remote) {
        guard !self.publish(.pending(deliveries), to: remote), deliveries.count > 1 else { return }
        self.publish(Array(deliveries.prefix(deliveries.count / 2)), to: remote)
        self.publish(Array(deliveries.dropFirst(deliveries.count / 2)), to: remote)
    }

    /// Ends the consumer: what it held unacknowledged waits for the next; the edge is told (a
    /// DETACH reply frame on its inbox) unless it asked. On `loop`.
    private func end(_ id: String, tellingTheEdge: Bool = true) {
        guard let remote = self.consumers.value.removeValue(forKey: id) else { return }
        remote.consumer.detach()
        if tellingTheEdge { self.publish(.done(.detach), to: remote) }
    }

    /// Publishes `message` to the edge, numbered; false when it does not fit in one NATS message.
    @discardableResult
    private func publish(_ message: ServerMessage, to remote: Remote) -> Bool {
        var frame = ByteBuffer()
        do {
            try ServerFrame(requestID: remote.published &+ 1, message: message).encode(into: &frame, maximumPayloadSize: Self.maximumMessage)
        } catch {
            return false
        }
        remote.published &+= 1
        // Lost (NATS down, the edge gone): the edge sees the gap or stops answering, and it ends.
        try? self.node.jetStream.publishCore(Array(frame.readableBytesView), to: remote.inbox)
        return true
    }

    /// The largest frame sent to an edge: under NATS's default 1 MB message.
    static let maximumMessage = (1 << 20) - 4096
}
