internal import FanoutCluster
internal import FanoutCore
internal import FanoutWire
internal import NIOCore

/// The owner's side of a node-to-node call (`ShardRequests`, `ShardConsumers`): a subscription per
/// shard the node owns, on that shard's subject, and the answer to a call as one reply frame.
final class OwnedShardSubjects: Sendable {
    private let node: ClusterNode
    private let subject: @Sendable (Int) -> String
    private let subscriptions = Locked<[Int: NATSSubscription]>([:])

    init(node: ClusterNode, subject: @escaping @Sendable (Int) -> String) {
        self.node = node
        self.subject = subject
    }

    /// Subscribes to the subjects of the shards the node owns now, each message to `handle` with
    /// its shard, and stops those of the shards it no longer owns; the calls already routed to
    /// them are handled (drained), not dropped. Call it after each of the node's turns.
    func follow(_ handle: @escaping @Sendable (NATSSubscription.Message, Int) -> Void) {
        let owned = self.node.ownedShards
        let lost = self.subscriptions.withLock { subscriptions in
            let lost = subscriptions.filter { !owned.contains($0.key) }
            for shard in lost.keys { subscriptions[shard] = nil }
            for shard in owned where subscriptions[shard] == nil {
                subscriptions[shard] = try? self.node.jetStream.subscribe(self.subject(shard)) { message in handle(message, shard) }
            }
            return lost
        }
        lost.values.forEach { $0.cancel() }
    }

    /// Stops every subscription.
    func stop() {
        let subscriptions = self.subscriptions.withLock { subscriptions in
            defer { subscriptions = [:] }
            return subscriptions
        }
        subscriptions.values.forEach { $0.cancel() }
    }

    /// Answers a call on `reply` with one reply frame (an `INTERNAL` error's, when the answer does
    /// not encode).
    static func responder(to reply: String, node: ClusterNode, maximumPayloadSize: Int) -> @Sendable (ServerMessage) -> Void {
        { answer in
            var frame = ByteBuffer()
            if (try? ServerFrame(requestID: 0, message: answer).encode(into: &frame, maximumPayloadSize: maximumPayloadSize)) == nil {
                frame.clear()
                try? ServerFrame(requestID: 0, message: .error(FanoutError(.internal, "the reply does not encode"))).encode(into: &frame)
            }
            try? node.jetStream.publishCore(Array(frame.readableBytesView), to: reply)
        }
    }
}
