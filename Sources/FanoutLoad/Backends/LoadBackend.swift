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

    /// Gives installation `index` the token of `generation`.
    func refreshToken(_ index: Int, generation: Int, worker: Int) async throws

    /// Subscribes the installations to the topic; returns how many subscriptions that made.
    func subscribe(_ members: ArraySlice<Int>, to topic: String, worker: Int) async throws -> Int

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
