internal import DequeModule
public import FanoutWire
internal import Synchronization

/// The deliveries of an attachment, as they arrive: iterate it one by one, or take what has
/// arrived in batches with `nextBatch` (to acknowledge many with one ACK). It ends after `detach`
/// and throws when the connection is lost. At most the attachment's credit is ever buffered.
public final class DeliveryStream: AsyncSequence, Sendable {
    public typealias Element = WireDelivery

    private struct State {
        var buffer = Deque<WireDelivery>()
        var end: Result<Void, any Error>?
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())

    init() {}

    /// Waits until at least one delivery has arrived, then returns up to `maximum` of those that
    /// have; an empty array once the stream has ended.
    /// - Throws: the connection's error if it was lost.
    public func nextBatch(maximum: Int = .max) async throws -> [WireDelivery] {
        while true {
            enum Step { case batch([WireDelivery]), end(Result<Void, any Error>), wait }
            let step = self.state.withLock { state -> Step in
                if !state.buffer.isEmpty {
                    let count = Swift.min(Swift.max(maximum, 1), state.buffer.count)
                    let batch = Array(state.buffer.prefix(count))
                    state.buffer.removeFirst(count)
                    return .batch(batch)
                }
                if let end = state.end { return .end(end) }
                return .wait
            }
            switch step {
            case .batch(let batch):
                return batch
            case .end(let end):
                try end.get()
                return []
            case .wait:
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let resumeNow = self.state.withLock { state -> Bool in
                        guard state.buffer.isEmpty, state.end == nil else { return true }
                        state.waiter = continuation
                        return false
                    }
                    if resumeNow { continuation.resume() }
                }
            }
        }
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
        let waiter = self.state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard state.end == nil else { return nil }
            state.buffer.append(delivery)
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    func finish(throwing error: (any Error)? = nil) {
        let waiter = self.state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.end == nil {
                state.end = error.map { .failure($0) } ?? .success(())
            }
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }
}
