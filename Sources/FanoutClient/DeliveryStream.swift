internal import FanoutModel
public import FanoutWire

/// The deliveries of an attachment, as they arrive: iterate it one by one, or take what has
/// arrived in batches with `nextBatch` (to acknowledge many with one ACK). It ends after `detach`
/// and throws when the connection is lost. At most the attachment's credit is ever buffered.
public final class DeliveryStream: AsyncSequence, Sendable {
    public typealias Element = WireDelivery

    private let queue = BatchQueue<WireDelivery>()

    init() {}

    /// Waits until at least one delivery has arrived, then returns up to `maximum` of those that
    /// have; an empty array once the stream has ended.
    /// - Throws: the connection's error if it was lost.
    public func nextBatch(maximum: Int = .max) async throws -> [WireDelivery] {
        try await self.queue.nextBatch(maximum: maximum)
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let stream: DeliveryStream

        public mutating func next() async throws -> WireDelivery? {
            try await self.stream.nextBatch(maximum: 1).first
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(stream: self)
    }

    // MARK: - Fed by the connection's handler

    func yield(_ delivery: WireDelivery) {
        self.queue.append(delivery)
    }

    func yield(contentsOf deliveries: [WireDelivery]) {
        self.queue.append(contentsOf: deliveries)
    }

    func finish(throwing error: (any Error)? = nil) {
        self.queue.finish(throwing: error)
    }
}
