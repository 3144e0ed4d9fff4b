internal import FanoutCluster
internal import FanoutCore
internal import FanoutModel

/// A consumer attached to a cluster node (docs/scale-out.md, "Consumers"): it receives its
/// platform's deliveries from every shard the node owns, through one engine consumer per owned
/// shard. A worker fleet attaches to every node, so that every shard has consumers whichever node
/// owns it.
///
/// Credit is the connection's: each shard's consumer is attached with the whole credit (a shard
/// with the only pending deliveries is not starved), and this consumer hands out at most the
/// credit unacknowledged across them. An acknowledgement goes to the shard its id names (a
/// message sequence's residue modulo the shard count is its shard). When the node takes a shard,
/// the consumer attaches to it at the next `refresh()`; when the node loses one, its part ends,
/// and what this consumer held from it unacknowledged is delivered again by the new owner (at
/// least once).
final class ClusterConsumer: Sendable {
    /// A shard's consumer, and the engine it is attached to.
    private struct Part {
        let engine: Engine
        let consumer: DeliveryConsumer
    }

    private struct State {
        var parts: [Int: Part] = [:]
        var credit: Int
        /// What was handed out and not acknowledged yet.
        var outstanding: Set<DeliveryID> = []
        /// The shard the next poll starts at, so that no shard starves the others.
        var nextShard = 0
        /// The last poll's wake-up, called when a part arrives.
        var ready: (@Sendable () -> Void)?
        var isDetached = false
    }

    private let node: ClusterNode
    private let scope: ConsumerScope
    private let project: ProjectID
    private let state: Locked<State>

    /// Attaches to every shard the node owns now.
    init(node: ClusterNode, scope: ConsumerScope, credit: Int, in project: ProjectID) throws(FanoutError) {
        self.node = node
        self.scope = scope
        self.project = project
        self.state = Locked(State(credit: credit))
        try self.refresh(throwing: true)
    }

    /// Follows the node's ownership: attaches to the shards it took, drops the parts of those it
    /// lost (their engines are closed).
    func refresh() {
        try? self.refresh(throwing: false)
    }

    private func refresh(throwing: Bool) throws(FanoutError) {
        let served = self.node.servedShards
        /// Whether `part` is on the engine the node owns shard `shard` with now.
        func isCurrent(_ shard: Int, _ part: Part?) -> Bool {
            served[shard].isOwner && part.map { $0.engine === served[shard].engine } == true
        }
        let (credit, held) = self.state.withLock { ($0.credit, $0.parts) }
        var attached: [Int: Part] = [:]
        for (shard, view) in served.enumerated() where view.isOwner && !isCurrent(shard, held[shard]) {
            do throws(FanoutError) {
                attached[shard] = Part(engine: view.engine, consumer: try view.engine.attachConsumer(self.scope, credit: credit, in: self.project))
            } catch {
                if throwing { throw error }
            }
        }
        let (ready, unwanted): ((@Sendable () -> Void)?, [Part]) = self.state.withLock { state in
            guard !state.isDetached else { return (nil, Array(attached.values)) }
            var unwanted: [Part] = []
            for (shard, part) in state.parts where !isCurrent(shard, part) {
                unwanted.append(part)
                state.parts[shard] = nil
                state.outstanding = state.outstanding.filter { self.node.map.shard(of: $0) != shard }
            }
            state.parts.merge(attached) { _, new in new }
            guard !attached.isEmpty else { return (nil, unwanted) }
            defer { state.ready = nil }
            return (state.ready, unwanted)
        }
        // The parts of shards lost (their engines are closing), or attached after a detach.
        for part in unwanted { part.consumer.detach() }
        ready?()
    }

    /// Takes up to `maximum` deliveries (and no more than the credit left) from the shards in
    /// turn; when there are none, `ready` is called once when some arrive (or a shard is added).
    func poll(maximum: Int, orWhenReady ready: @escaping @Sendable () -> Void) -> [Delivery] {
        self.state.withLock { state in
            let room = min(maximum, state.credit - state.outstanding.count)
            guard !state.isDetached else { return [] }
            guard room > 0 else {
                state.ready = ready  // called when an acknowledgement or a grant makes room
                return []
            }
            let shards = state.parts.keys.sorted()
            var deliveries: [Delivery] = []
            for offset in shards.indices where deliveries.count < room {
                let shard = shards[(offset + state.nextShard) % shards.count]
                deliveries += state.parts[shard]?.consumer.poll(maximum: room - deliveries.count, orWhenReady: ready).deliveries ?? []
            }
            state.nextShard += 1
            for delivery in deliveries { state.outstanding.insert(delivery.id) }
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
        for part in parts { try part.consumer.grant(credit) }
        ready?()
    }

    /// Detaches from every shard: what it holds unacknowledged waits for the next consumer.
    func detach() {
        let parts = self.state.withLock { state in
            state.isDetached = true
            defer { state.parts = [:] }
            return Array(state.parts.values)
        }
        for part in parts { part.consumer.detach() }
    }

    /// Acknowledges deliveries it handed out, at the shards that handed them out; `done` gets how
    /// many were still pending, once every shard's acknowledgement is durable (ids of a shard this
    /// node no longer owns count as gone).
    func acknowledge(_ ids: [DeliveryID], done: @escaping @Sendable (Result<Int, FanoutError>) -> Void) {
        let (groups, ready) = self.state.withLock { state in
            var groups: [Int: (part: Part, ids: [DeliveryID])] = [:]
            for id in ids where state.outstanding.remove(id) != nil {
                let shard = self.node.map.shard(of: id)
                guard let part = state.parts[shard] else { continue }
                groups[shard, default: (part, [])].ids.append(id)
            }
            let ready = groups.isEmpty ? nil : state.ready
            if ready != nil { state.ready = nil }
            return (Array(groups.values), ready)
        }
        ready?()
        guard !groups.isEmpty else {
            done(.success(0))
            return
        }
        let results = Locked((waiting: groups.count, count: 0, failure: FanoutError?.none))
        for (part, ids) in groups {
            part.engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in try changes.acknowledge(ids, by: part.consumer) }.whenDurable { result in
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
        }
    }
}
