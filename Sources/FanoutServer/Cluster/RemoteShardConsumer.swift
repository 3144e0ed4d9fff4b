internal import DequeModule
internal import FanoutCluster
internal import FanoutCore
internal import FanoutModel
internal import FanoutWire
internal import NIOCore

/// The edge's side of a consumer of a shard another node owns (`ShardConsumers` is the owner's):
/// it attaches through NATS, keeps what the owner publishes to its inbox until the connection
/// takes it, and sends the connection's acknowledgements and grants to the owner. It ends when the
/// owner says so (it stopped owning the shard), when a message to it was lost (a gap in their
/// numbers), or when the owner no longer knows it; its consumer then attaches again, to the
/// shard's owner of the moment.
final class RemoteShardConsumer: Sendable {
    let shard: Int
    /// Unique in the cluster: the node's name, then a random number.
    let id: String
    private let requests: ShardRequests
    private let state: Locked<State>
    private let subscription = Locked<NATSSubscription?>(nil)
    /// The calls waiting for the owner, ended at once when it is found gone.
    private let calls = NATSRequester.Group()

    private struct State {
        var received: Deque<WireDelivery> = []
        var lastMessage: UInt32 = 0
        var hasEnded = false
    }

    /// How long a call waits for the owner.
    static let timeout = Duration.seconds(10)

    private init(shard: Int, requests: ShardRequests) {
        self.shard = shard
        self.id = "\(requests.node.node).\(UInt64.random(in: 1...UInt64.max))"
        self.requests = requests
        self.state = Locked(State())
    }

    /// Attaches to shard `shard`'s owner with `scope` and `credit`; `arrived` is called (on NATS's
    /// thread) each time deliveries arrive or the consumer ends. Nil when the owner did not take
    /// it (none now, or it refused: the next refresh tries again).
    static func attach(
        shard: Int, project: String, scope: AttachScope, credit: Int, requests: ShardRequests, arrived: @escaping @Sendable () -> Void
    ) async -> RemoteShardConsumer? {
        let remote = RemoteShardConsumer(shard: shard, requests: requests)
        do {
            let subscription = try requests.node.jetStream.subscribe(ShardConsumers.inbox(remote.id)) { [weak remote] message in
                remote?.received(message.data)
                arrived()
            }
            remote.subscription.withLock { $0 = subscription }
        } catch {
            return nil
        }
        guard case .done(.attach) = await remote.call(.attach(project: project, scope: scope, credit: UInt32(clamping: credit))) else {
            remote.close(tellingTheOwner: false)
            return nil
        }
        return remote
    }

    /// Whether it has ended (see the type's description).
    var hasEnded: Bool { self.state.withLock { $0.hasEnded } }

    /// Up to `maximum` of the deliveries received, oldest first.
    func take(maximum: Int) -> [WireDelivery] {
        self.state.withLock { state in
            let count = min(maximum, state.received.count)
            defer { state.received.removeFirst(count) }
            return Array(state.received.prefix(count))
        }
    }

    /// Acknowledges `ids` at the owner: how many were still pending, once durable. When the owner
    /// no longer knows this consumer (it stopped owning the shard, or died), the new owner hands
    /// them out again: refused (`ClusterConsumer.handedOutAgain`), and this consumer ends.
    func acknowledge(_ ids: [DeliveryID]) async -> Result<Int, FanoutError> {
        switch await self.call(.acknowledge(ids)) {
        case .count(_, let count): return .success(Int(count))
        case .error(let error) where error == ShardConsumers.unknown(self.id) || error == Self.noOwner:
            self.end()
            return .failure(ClusterConsumer.handedOutAgain(ids.count))
        case .error(let error): return .failure(error)
        default: return .failure(FanoutError(.internal, "an unexpected answer to an acknowledgement"))
        }
    }

    private static let noOwner = FanoutError(.unavailable, "", field: "shard")

    /// Raises the owner's consumer's credit.
    func grant(_ credit: Int) async {
        _ = await self.call(.grant(credit: UInt32(clamping: credit)))
    }

    /// Tells the owner it is still here; ends it when the owner no longer knows it. When the
    /// owner is gone (nobody owns the shard, or another node does and does not know this
    /// consumer), the calls still waiting for it (an ACK sent just before it died) are answered
    /// `UNAVAILABLE` at once instead of after their timeout: they may or may not have been
    /// performed, as after a timeout.
    func keepAlive() async {
        guard case .error(let error) = await self.call(.ping) else { return }
        self.end()
        if error == ShardConsumers.unknown(self.id) || error == Self.noOwner {
            self.requests.requester.fail(self.calls, with: FanoutError(.unavailable, "shard \(self.shard)'s owner went away before it answered: the call may or may not have been performed"))
        }
    }

    /// Ends it: the owner's consumer is detached (what it held waits for the next), and nothing
    /// more is received.
    func close(tellingTheOwner: Bool = true) {
        self.end()
        // Unsubscribed at once as it goes (no drain: what is still on its way no longer matters,
        // and a drain would wait for NATS).
        self.subscription.withLock { $0 = nil }
        if tellingTheOwner {
            Task { _ = await self.call(.detach) }
        }
    }

    private func end() {
        self.state.withLock { state in
            state.hasEnded = true
            state.received.removeAll()
        }
    }

    /// A message on the inbox: deliveries, or the owner's end; a gap in the numbers ends it.
    private func received(_ bytes: [UInt8]) {
        var buffer = ByteBuffer(bytes: bytes)
        var decoder = FrameDecoder<ServerMessage>(maximumPayloadSize: ShardConsumers.maximumMessage)
        let frame = try? decoder.decode(buffer: &buffer)
        let isGap = self.state.withLock { state -> Bool in
            guard !state.hasEnded else { return false }
            guard let frame, frame.requestID == state.lastMessage &+ 1 else {
                state.hasEnded = true
                state.received.removeAll()
                return true
            }
            state.lastMessage = frame.requestID
            switch frame.message {
            case .pending(let deliveries): state.received.append(contentsOf: deliveries)
            default:
                state.hasEnded = true
                state.received.removeAll()
            }
            return false
        }
        if isGap { Task { _ = await self.call(.detach) } }
    }

    private func call(_ request: ClientRequest) async -> ServerMessage {
        let bytes: [UInt8]
        do {
            bytes = try ShardConsumers.call(self.id, request, maximumPayloadSize: self.requests.maximumPayloadSize)
        } catch {
            return .error(error)
        }
        switch await self.requests.requester.request(bytes, to: ShardConsumers.subject(self.shard), timeout: Self.timeout, in: self.calls) {
        case .answer(let answer):
            var buffer = ByteBuffer(bytes: answer)
            var decoder = FrameDecoder<ServerMessage>(maximumPayloadSize: self.requests.maximumPayloadSize)
            guard let frame = try? decoder.decode(buffer: &buffer) else {
                return .error(FanoutError(.internal, "shard \(self.shard)'s owner answered with bytes that are not a reply frame"))
            }
            return frame.message
        case .noResponders:
            return .error(FanoutError(.unavailable, "no node owns shard \(self.shard) now", field: "shard"))
        case .failed(let error):
            return .error(error)
        }
    }
}
