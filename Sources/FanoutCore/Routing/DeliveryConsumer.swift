/// A consumer attached to the engine: a device for its own installations, or a delivery worker
/// for a platform. Iterate it (`for await delivery in consumer`) or `poll` it; acknowledge what
/// was handled; `grant` more credit; `detach` when done (deinit detaches too).
///
/// The engine hands it at most `credit` unacknowledged deliveries. An acknowledgement returns once
/// it is as durable as the engine's durability; an acknowledged delivery is never delivered again.
public final class DeliveryConsumer: AsyncSequence, Sendable {
    public typealias Element = Delivery

    let engine: Engine
    public let project: ProjectID
    let id: UInt64
    private let sink: DeliverySink

    init(engine: Engine, project: ProjectID, id: UInt64, sink: DeliverySink) {
        self.engine = engine
        self.project = project
        self.id = id
        self.sink = sink
    }

    deinit {
        self.engine.detach(consumer: self.id, in: self.project)
    }

    /// Acknowledges deliveries this consumer holds; returns how many were still pending (a
    /// delivery collapsed or expired meanwhile is gone already). Ids it does not hold are ignored.
    /// - Throws: `FAILED_PRECONDITION` once detached.
    @discardableResult
    public func acknowledge(_ ids: [DeliveryID]) async throws(FanoutError) -> Int {
        try await self.engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in try changes.acknowledge(ids, by: self) }.durable()
    }

    /// Raises the number of unacknowledged deliveries it may hold by `credit`.
    public func grant(_ credit: Int) throws(FanoutError) {
        try self.engine.grant(credit, consumer: self.id, in: self.project)
    }

    /// Detaches: the stream ends, and what it holds unacknowledged waits for the next consumer.
    public func detach() {
        self.engine.detach(consumer: self.id, in: self.project)
    }

    /// Takes up to `maximum` deliveries that have arrived, without waiting.
    public func poll(maximum: Int = .max) -> [Delivery] {
        self.sink.poll(maximum: maximum)
    }

    /// For event-loop servers: takes up to `maximum` deliveries that have arrived; when none
    /// have, `ready` is called once when some arrive or the consumer ends, from the thread that
    /// hands them out and possibly under the engine's locks: it must only schedule work (hand it
    /// to an event loop), never block or call the engine. `finished`: detached (or
    /// the engine closed) and drained; nothing more arrives.
    public func poll(maximum: Int, orWhenReady ready: @escaping @Sendable () -> Void) -> (deliveries: [Delivery], finished: Bool) {
        self.sink.poll(maximum: maximum, orWhenReady: ready)
    }

    /// `poll(maximum:orWhenReady:)` with the deliveries as slices of the batches the engine
    /// handed out, so that none is copied (the server's DELIVERIES writer takes slices).
    package func pollSlices(maximum: Int, orWhenReady ready: @escaping @Sendable () -> Void) -> (slices: [ArraySlice<Delivery>], finished: Bool) {
        self.sink.pollSlices(maximum: maximum, orWhenReady: ready)
    }

    /// The next delivery, waiting for it; `nil` once detached (or the engine closed) and drained.
    public func next() async -> Delivery? {
        await self.sink.next()
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let sink: DeliverySink

        public mutating func next() async -> Delivery? {
            await self.sink.next()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(sink: self.sink)
    }
}
