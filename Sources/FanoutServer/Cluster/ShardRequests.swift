internal import FanoutCluster
internal import FanoutCore
internal import FanoutKeys
internal import FanoutModel
internal import FanoutWire
internal import NIOCore

/// Requests for one shard, performed by its owner (docs/scale-out.md, "Routing"): here when this
/// node owns the shard, otherwise sent over NATS to the subject `fanout.requests.shard.N`, which
/// only the shard's owner subscribes to. A request travels as its wire frame (docs/wire-protocol.md)
/// and is answered with the reply's frame. The node that received the request from its client has
/// checked the client's key already; the owner performs it as the cluster's own principal, or, when
/// the frame's request id is 1, as an app's key (a REGISTER that issues credentials and only
/// creates).
final class ShardRequests: Sendable {
    let node: ClusterNode
    let requester: NATSRequester
    let maximumPayloadSize: Int
    /// This node's installation tokens, which an owner issues credentials with; nil: none.
    let tokens: InstallationTokens?
    /// How long a request waits for a remote owner's answer.
    private let timeout: Duration
    /// The owner's side: one subscription per shard this node owns.
    private let subjects: OwnedShardSubjects

    /// What an owner performs forwarded requests as: every request of every project.
    static let principal = Principal.key(APIKey(name: "cluster", role: .admin, projects: .all, digest: []), role: .admin)
    /// What an owner performs an app key's forwarded request as (request id 1).
    static let appPrincipal = Principal.key(APIKey(name: "cluster-app", role: .app, projects: .all, digest: []), role: .app)

    init(node: ClusterNode, maximumPayloadSize: Int, tokens: InstallationTokens? = nil, timeout: Duration = .seconds(30)) throws(FanoutError) {
        self.node = node
        self.tokens = tokens
        self.requester = try NATSRequester(node.jetStream)
        self.subjects = OwnedShardSubjects(node: node, subject: Self.subject)
        self.maximumPayloadSize = maximumPayloadSize
        self.timeout = timeout
    }

    static func subject(_ shard: Int) -> String { "fanout.requests.shard.\(shard)" }

    // MARK: - The edge's side

    /// `request` performed by shard `shard`'s owner: its reply, or `.error` when no owner answered.
    /// While nobody owns the shard (a hand-over between two turns, or a failover: the dead owner's
    /// lease runs out, then another node takes the shard at its next turn), or the node it reached
    /// has just lost it, it is sent again, for up to two leases; a request whose answer did not
    /// come back is not (it may have been applied).
    /// With `asApp`, the owner performs it as an app's key does (a REGISTER that creates only).
    func perform(_ request: ClientRequest, onShard shard: Int, asApp: Bool = false) async -> ServerMessage {
        let deadline = ContinuousClock.now + self.node.lease * 2
        while true {
            if let (engine, applied) = self.performHere(request, onShard: shard, as: asApp ? Self.appPrincipal : Self.principal) {
                do {
                    return try await applied.durable()
                } catch {
                    // Refused by the engine of a shard this node was handing on: sent to the new owner.
                    guard engine.refusedAsClosed(error), ContinuousClock.now < deadline else { return .error(error) }
                    try? await Task.sleep(for: .milliseconds(50))
                    continue
                }
            }
            var frame = ByteBuffer()
            do {
                try ClientFrame(requestID: asApp ? 1 : 0, request: request).encode(into: &frame, maximumPayloadSize: self.maximumPayloadSize)
            } catch {
                return .error(error.fanoutError)
            }
            switch await self.requester.request(Array(frame.readableBytesView), to: Self.subject(shard), timeout: self.timeout) {
            case .answer(let bytes):
                let reply = self.decodeReply(bytes, shard: shard)
                // The node it reached had just lost the shard and performed nothing: try again.
                guard case .error(let error) = reply, error == Self.notOwnedHere(shard), ContinuousClock.now < deadline else { return reply }
                try? await Task.sleep(for: .milliseconds(50))
            case .failed(let error):
                return .error(error)
            case .noResponders:
                guard ContinuousClock.now < deadline else {
                    return .error(FanoutError(.unavailable, "no node owns shard \(shard) now: try again"))
                }
                try? await Task.sleep(for: .milliseconds(50))
            }
        }
    }

    /// `request` performed on every shard, each reply by its shard's number.
    func performOnEveryShard(_ request: ClientRequest) async -> [ServerMessage] {
        await self.perform(Array(repeating: request, count: self.node.map.count).enumerated().map { ($0.offset, $0.element) })
    }

    /// Requests on several shards at once, the replies in the order given.
    func perform(_ requests: [(shard: Int, request: ClientRequest)]) async -> [ServerMessage] {
        await withTaskGroup(of: (Int, ServerMessage).self) { group in
            for (index, (shard, request)) in requests.enumerated() {
                group.addTask { (index, await self.perform(request, onShard: shard)) }
            }
            var replies = [ServerMessage](repeating: .error(FanoutError(.internal, "no reply")), count: requests.count)
            for await (index, reply) in group { replies[index] = reply }
            return replies
        }
    }

    private func decodeReply(_ bytes: [UInt8], shard: Int) -> ServerMessage {
        guard let frame: ServerFrame = self.frame(bytes) else {
            return .error(FanoutError(.internal, "shard \(shard)'s owner answered with \(bytes.count) bytes that are not one reply frame"))
        }
        return frame.message
    }

    /// The one whole frame `bytes` hold, or nil.
    private func frame<Message: WireMessage>(_ bytes: [UInt8]) -> Frame<Message>? {
        var buffer = ByteBuffer(bytes: bytes)
        var decoder = FrameDecoder<Message>(maximumPayloadSize: self.maximumPayloadSize)
        guard let frame = try? decoder.decode(buffer: &buffer), buffer.readableBytes == 0 else { return nil }
        return frame
    }

    // MARK: - The owner's side

    /// The answer of a node that no longer owns the shard (it lost it since it subscribed): it
    /// performed nothing, so the request may be sent again.
    static func notOwnedHere(_ shard: Int) -> FanoutError {
        FanoutError(.unavailable, "shard \(shard) is not owned here now: try again", field: "shard")
    }

    /// `request` applied to shard `shard`'s engine when this node owns it, with that engine; nil
    /// when it does not.
    private func performHere(_ request: ClientRequest, onShard shard: Int, as principal: Principal) -> (Engine, Engine.Applied<ServerMessage>)? {
        let served = self.node.served(shard)
        guard served.isOwner else { return nil }
        let executor = RequestExecutor(engine: served.engine, maximumPayloadSize: self.maximumPayloadSize, tokens: self.tokens)
        return (served.engine, served.engine.apply { (changes: inout Engine.Changes) throws(FanoutError) -> ServerMessage in
            try executor.execute(request, principal: principal, changes: &changes)
        })
    }

    /// Subscribes to the requests of the shards this node owns now, and stops answering those of
    /// the shards it no longer owns (the requests already routed here are answered: `notOwnedHere`,
    /// so sent again). Call it after each of the node's turns.
    func followOwnership() {
        self.subjects.follow { [weak self] message, shard in self?.answer(message, shard: shard) }
    }

    /// Stops answering every shard's requests.
    func stopAnswering() {
        self.subjects.stop()
    }

    private func answer(_ message: NATSSubscription.Message, shard: Int) {
        guard let reply = message.reply else { return }
        let respond = OwnedShardSubjects.responder(to: reply, node: self.node, maximumPayloadSize: self.maximumPayloadSize)
        guard let frame: ClientFrame = self.frame(message.data) else {
            respond(.error(FanoutError(.invalidArgument, "a forwarded request is not one request frame")))
            return
        }
        guard let (engine, applied) = self.performHere(frame.request, onShard: shard, as: frame.requestID == 1 ? Self.appPrincipal : Self.principal) else {
            respond(.error(Self.notOwnedHere(shard)))
            return
        }
        applied.whenDurable { result in
            switch result {
            case .success(let answer): respond(answer)
            case .failure(let error): respond(.error(engine.refusedAsClosed(error) ? Self.notOwnedHere(shard) : error))
            }
        }
    }
}
