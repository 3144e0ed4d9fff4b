/// A system the harness drives with the same operations and the same data: fanoutd, or Redis as a
/// push backend would use it. `worker` picks the connection (workers share a few connections and
/// pipeline on them).
public protocol LoadBackend: Sendable {
    /// `fanout` or `redis`.
    var system: String { get }

    /// Registers installation `index` (its FID, token and platform).
    func register(_ index: Int, worker: Int) async throws

    /// Registers installations `indices` in one request (fanout: REGISTER_BATCH; Redis: a pipeline
    /// of HSETs); returns how many were registered.
    func registerBatch(_ indices: Range<Int>, worker: Int) async throws -> Int

    /// The register-batch phase's calls, one per batch, each returning how many installations it
    /// registered: each request written as the system's client sends it (fanout: an
    /// `EncodedRequest`; Redis: the pipeline's RESP) now, before the phase's clock starts, as
    /// `subscriptionCalls` does. (Written during the phase, the requests were half of the
    /// harness's CPU there, on both sides.) By default, calls of `registerBatch`.
    func registrationBatchCalls(_ batches: [Range<Int>]) -> [PreparedCall]

    /// Gives installation `index` the token of `generation`.
    func refreshToken(_ index: Int, generation: Int, worker: Int) async throws

    /// Subscribes the installations to the topic; returns how many subscriptions that made.
    func subscribe(_ members: ArraySlice<Int>, to topic: String, worker: Int) async throws -> Int

    /// The subscribe phase's calls, one per batch, each returning how many subscriptions it made:
    /// each request's data (its 1000 tokens, packed as the system's client sends them) made now,
    /// before the phase's clock starts, as a client importing subscriptions holds its tokens at
    /// hand. (Gathered during the phase, 1000 random tokens per call were half of the harness's
    /// CPU there.) By default, calls of `subscribe`.
    func subscriptionCalls(_ batches: [(topic: String, members: ArraySlice<Int>)]) -> [PreparedCall]

    /// Sends to a topic; returns how many recipients the send reached.
    func sendToTopic(_ topic: String, worker: Int) async throws -> Int

    /// Sends to a condition; returns how many recipients the send reached.
    func sendToCondition(_ condition: LoadCondition, worker: Int) async throws -> Int

    /// A round trip that does nothing (PING).
    func ping(worker: Int) async throws

    /// Reads installation `index` by its token.
    func readInstallation(_ index: Int, worker: Int) async throws

    /// Closes the connections.
    func close() async
}

/// One request of a phase, prepared before it (`LoadBackend.subscriptionCalls`,
/// `registrationBatchCalls`): sent on `worker`'s connection, it returns how many items it did.
public typealias PreparedCall = @Sendable (_ worker: Int) async throws -> Int

extension LoadBackend {
    public func subscriptionCalls(_ batches: [(topic: String, members: ArraySlice<Int>)]) -> [PreparedCall] {
        batches.map { topic, members in { worker in try await self.subscribe(members, to: topic, worker: worker) } }
    }

    public func registrationBatchCalls(_ batches: [Range<Int>]) -> [PreparedCall] {
        batches.map { indices in { worker in try await self.registerBatch(indices, worker: worker) } }
    }
}
