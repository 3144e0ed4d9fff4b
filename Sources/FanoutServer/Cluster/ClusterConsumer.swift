internal import FanoutCluster
internal import FanoutCore
internal import FanoutModel
internal import FanoutWire

/// A consumer attached to a cluster node (docs/scale-out.md, "Consumers"): it receives the
/// deliveries of its scope (a platform, or named installations) from every shard that holds any,
/// through one part per shard: an engine consumer on a shard this node owns, and on a shard
/// another node owns, a `RemoteShardConsumer` attached to that node's `ShardConsumers` over NATS.
///
/// Credit is the connection's: each part is attached with the whole credit (a shard with the only
/// pending deliveries is not starved), and this consumer hands out at most the credit
/// unacknowledged across them. An acknowledgement goes to the shard its id names (a message
/// sequence's residue modulo the shard count is its shard). At each `refresh()` (after the node's
/// turn) the parts follow ownership: a shard the node took gets a local part, a shard it lost or
/// whose remote part ended gets a remote part again; what a part that ended held unacknowledged
/// is handed out again by the shard's owner (at least once).
final class ClusterConsumer: Sendable {
    private enum Part {
        case local(engine: Engine, consumer: DeliveryConsumer)
        case remote(RemoteShardConsumer)
    }

    private struct State {
        var parts: [Int: Part] = [:]
        /// The shards whose remote part is being attached.
        var attaching: Set<Int> = []
        var credit: Int
        /// What was handed out and not acknowledged yet.
        var outstanding: Set<DeliveryID> = []
        /// What was handed out by a part that ended before it was acknowledged: the shard's owner
        /// hands it out again, so its acknowledgement is refused.
        var orphaned: Set<DeliveryID> = []
        /// The shard the next poll starts at, so that no shard starves the others.
        var nextShard = 0
        /// The last poll's wake-up, called when a part arrives or deliveries do.
        var ready: (@Sendable () -> Void)?
        var isDetached = false
    }

    private let requests: ShardRequests
    private var node: ClusterNode { self.requests.node }
    private let project: String
    /// Each shard's part of the scope; the shards with none have no part.
    private let scopes: [Int: AttachScope]
    private let state: Locked<State>

    /// Attaches to every shard of `scopes` this node owns now, and starts attaching to the others.
    init(requests: ShardRequests, scopes: [Int: AttachScope], credit: Int, in project: String) throws(FanoutError) {
        self.requests = requests
        self.scopes = scopes
        self.project = project
        self.state = Locked(State(credit: credit))
        try self.refresh(throwing: true)
    }

    /// Follows the node's ownership (see the type's description), and tells the owners of the
    /// remote parts that this consumer is still here.
    func refresh() {
        try? self.refresh(throwing: false)
    }

    private func refresh(throwing: Bool) throws(FanoutError) {
        let served = self.node.servedShards
        /// Whether `part` is what shard `shard` needs now.
        func isCurrent(_ shard: Int, _ part: Part?) -> Bool {
            switch part {
            case .local(let engine, _): served[shard].isOwner && engine === served[shard].engine
            case .remote(let remote): !served[shard].isOwner && !remote.hasEnded
            case nil: false
            }
        }
        let (credit, held) = self.state.withLock { ($0.credit, $0.parts) }
        var attached: [Int: Part] = [:]
        var remote: [Int] = []
        for (shard, scope) in self.scopes.sorted(by: { $0.key < $1.key }) where !isCurrent(shard, held[shard]) {
            guard served[shard].isOwner else {
                remote.append(shard)
                continue
            }
            do throws(FanoutError) {
                let consumer = try served[shard].engine.attachConsumer(try RequestExecutor.scope(scope), credit: credit, in: try RequestExecutor.project(self.project))
                attached[shard] = .local(engine: served[shard].engine, consumer: consumer)
            } catch where served[shard].engine.refusedAttachAsClosed(error) {
                remote.append(shard)  // this node stopped owning the shard meanwhile
            } catch {
                if throwing { throw error }
            }
        }
        let (ready, unwanted, toAttach): ((@Sendable () -> Void)?, [Part], [Int]) = self.state.withLock { state in
            guard !state.isDetached else { return (nil, Array(attached.values), []) }
            var unwanted: [Part] = []
            for (shard, part) in state.parts where !isCurrent(shard, part) {
                unwanted.append(part)
                state.parts[shard] = nil
                let orphaned = state.outstanding.filter { self.node.map.shard(of: $0) == shard }
                state.outstanding.subtract(orphaned)
                state.orphaned.formUnion(orphaned)
            }
            state.parts.merge(attached) { _, new in new }
            let toAttach = remote.filter { !state.attaching.contains($0) }
            state.attaching.formUnion(toAttach)
            guard !attached.isEmpty else { return (nil, unwanted, toAttach) }
            defer { state.ready = nil }
            return (state.ready, unwanted, toAttach)
        }
        // The parts of shards lost or ended (their engines closing, their owners gone), or
        // attached after a detach.
        for part in unwanted { Self.end(part) }
        ready?()
        for shard in toAttach {
            Task { await self.attachRemotely(shard, credit: credit) }
        }
        let remotes = self.state.withLock { $0.parts.values.compactMap { if case .remote(let remote) = $0 { remote } else { nil } } }
        for remote in remotes {
            Task { await remote.keepAlive() }
        }
        self.wake()  // a local part held back while its lease was in doubt may hand out again
    }

    /// Attaches the part of shard `shard`, owned by another node; kept unless the shard is owned
    /// here meanwhile, or this consumer detached.
    private func attachRemotely(_ shard: Int, credit: Int) async {
        guard let scope = self.scopes[shard] else { return }
        let remote = await RemoteShardConsumer.attach(shard: shard, project: self.project, scope: scope, credit: credit, requests: self.requests) { [weak self] in
            self?.wake()
        }
        let (kept, ready): (Bool, (@Sendable () -> Void)?) = self.state.withLock { state in
            state.attaching.remove(shard)
            guard let remote, !state.isDetached, state.parts[shard] == nil, !self.node.served(shard).isOwner else { return (false, nil) }
            state.parts[shard] = .remote(remote)
            defer { state.ready = nil }
            return (true, state.ready)
        }
        if !kept { remote?.close() }
        ready?()
    }

    /// Deliveries arrived at a remote part: the last poll's wake-up, if it is waiting.
    private func wake() {
        let ready = self.state.withLock { state in
            defer { state.ready = nil }
            return state.ready
        }
        ready?()
    }

    /// The refusal of an acknowledgement of deliveries whose shard changed owners before it came.
    static func handedOutAgain(_ count: Int) -> FanoutError {
        FanoutError(.unavailable, "\(count) of these deliveries came from a shard whose owner changed since: they are handed out again", field: "ids")
    }

    private static func end(_ part: Part) {
        switch part {
        case .local(_, let consumer): consumer.detach()
        case .remote(let remote): remote.close()
        }
    }

    /// Takes up to `maximum` deliveries (and no more than the credit left) from the shards in
    /// turn; when there are none, `ready` is called once when some arrive (or a shard is added).
    func poll(maximum: Int, orWhenReady ready: @escaping @Sendable () -> Void) -> [WireDelivery] {
        self.state.withLock { state in
            let room = min(maximum, state.credit - state.outstanding.count)
            guard !state.isDetached else { return [] }
            guard room > 0 else {
                state.ready = ready  // called when an acknowledgement or a grant makes room
                return []
            }
            let shards = state.parts.keys.sorted()
            var deliveries: [WireDelivery] = []
            for offset in shards.indices where deliveries.count < room {
                let shard = shards[(offset + state.nextShard) % shards.count]
                switch state.parts[shard] {
                case .local(_, let consumer):
                    // Nothing while the lease may have run out unnoticed (`refresh` wakes it after a turn).
                    guard self.node.served(shard).holdsItsLease else { continue }
                    deliveries += consumer.poll(maximum: room - deliveries.count, orWhenReady: ready).deliveries.map(WireDelivery.init)
                case .remote(let remote):
                    deliveries += remote.take(maximum: room - deliveries.count)
                case nil:
                    break
                }
            }
            state.nextShard += 1
            for delivery in deliveries {
                state.outstanding.insert(delivery.id)
                state.orphaned.remove(delivery.id)  // handed out again: its acknowledgement counts
            }
            if deliveries.isEmpty { state.ready = ready }
            return deliveries
        }
    }

    /// Raises the credit by `credit` (on every shard's part too).
    func grant(_ credit: Int) throws(FanoutError) {
        let (parts, ready) = self.state.withLock { state in
            state.credit += credit
            defer { state.ready = nil }
            return (Array(state.parts.values), state.ready)
        }
        for part in parts {
            switch part {
            case .local(_, let consumer): try consumer.grant(credit)
            case .remote(let remote): Task { await remote.grant(credit) }
            }
        }
        ready?()
    }

    /// Detaches from every shard: what it holds unacknowledged waits for the next consumer.
    func detach() {
        let parts = self.state.withLock { state in
            state.isDetached = true
            defer { state.parts = [:] }
            return Array(state.parts.values)
        }
        for part in parts { Self.end(part) }
    }

    /// Acknowledges deliveries it handed out, at the shards that handed them out; `done` gets how
    /// many were still pending, once every shard's acknowledgement is durable. Deliveries whose
    /// part ended before (their shard changed owners) are handed out again by the shard's owner:
    /// their acknowledgement is refused (`UNAVAILABLE`), so that a delivery acknowledged with
    /// success never comes again.
    func acknowledge(_ ids: [DeliveryID], done: @escaping @Sendable (Result<Int, FanoutError>) -> Void) {
        let (groups, orphaned, ready) = self.state.withLock { state in
            var groups: [Int: (part: Part, ids: [DeliveryID])] = [:]
            var orphaned = 0
            for id in ids {
                if state.orphaned.remove(id) != nil { orphaned += 1 }
                guard state.outstanding.remove(id) != nil else { continue }
                let shard = self.node.map.shard(of: id)
                guard let part = state.parts[shard] else { continue }
                groups[shard, default: (part, [])].ids.append(id)
            }
            let ready = groups.isEmpty ? nil : state.ready
            if ready != nil { state.ready = nil }
            return (Array(groups.values), orphaned, ready)
        }
        ready?()
        let refusal = orphaned == 0 ? nil : Self.handedOutAgain(orphaned)
        guard !groups.isEmpty else {
            done(refusal.map { .failure($0) } ?? .success(0))
            return
        }
        let results = Locked((waiting: groups.count, count: 0, failure: refusal))
        let answered: @Sendable (Result<Int, FanoutError>) -> Void = { result in
            let finished: Result<Int, FanoutError>? = results.withLock { results in
                switch result {
                case .success(let count): results.count += count
                case .failure(let error): results.failure = results.failure ?? error
                }
                results.waiting -= 1
                guard results.waiting == 0 else { return nil }
                return results.failure.map { .failure($0) } ?? .success(results.count)
            }
            if let finished { done(finished) }
        }
        for (part, ids) in groups {
            switch part {
            case .local(let engine, let consumer):
                engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in try changes.acknowledge(ids, by: consumer) }.whenDurable(answered)
            case .remote(let remote):
                Task { answered(await remote.acknowledge(ids)) }
            }
        }
    }
}
