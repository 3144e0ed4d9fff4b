internal import DequeModule
internal import FanoutModel

/// Elements handed from producers to one consuming task, which takes what has arrived in batches
/// (`nextBatch` waits only while nothing is queued). The queue ends with `finish`: the consumer
/// still gets what was queued, then an empty batch, or the error it was finished with. With a
/// `limit`, `appendWaitingForRoom` holds its (one) producer back while that many are queued.
///
/// Shared by the server (a connection's replies waiting to be written) and the client (an
/// attachment's deliveries waiting to be read).
package final class BatchQueue<Element: Sendable>: Sendable {
    private struct State {
        var buffer = Deque<Element>()
        var end: Result<Void, any Error>?
        var consumer: CheckedContinuation<Void, Never>?
        var producer: CheckedContinuation<Void, Never>?
    }

    private enum Step {
        case batch([Element], producer: CheckedContinuation<Void, Never>?)
        case end(Result<Void, any Error>)
        case wait
    }

    private let state = Locked(State())
    private let limit: Int

    /// - Parameter limit: how many queued elements hold `appendWaitingForRoom` back.
    package init(limit: Int = .max) {
        self.limit = max(1, limit)
    }

    /// Queues the element, unless the queue has ended (then it is dropped).
    package func append(_ element: Element) {
        self.enqueue { $0.append(element) }
    }

    /// Queues the elements in order (with one lock and at most one wake-up), unless the queue has
    /// ended.
    package func append(contentsOf elements: [Element]) {
        self.enqueue { $0.append(contentsOf: elements) }
    }

    /// Adds to the buffer under the lock, unless the queue has ended, and wakes the consumer.
    private func enqueue(_ add: (inout Deque<Element>) -> Void) {
        let consumer = self.state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard state.end == nil else { return nil }
            add(&state.buffer)
            defer { state.consumer = nil }
            return state.consumer
        }
        consumer?.resume()
    }

    /// Queues the element, then waits while `limit` or more are queued, until the consumer takes
    /// them or the queue ends. One producer at a time.
    package func appendWaitingForRoom(_ element: Element) async {
        self.append(element)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let mustWait = self.state.withLock { state -> Bool in
                guard state.end == nil, state.buffer.count >= self.limit else { return false }
                state.producer = continuation
                return true
            }
            if !mustWait { continuation.resume() }
        }
    }

    /// Ends the queue; a waiting consumer or producer goes on.
    package func finish(throwing error: (any Error)? = nil) {
        let (consumer, producer) = self.state.withLock { state in
            if state.end == nil {
                state.end = error.map { .failure($0) } ?? .success(())
            }
            defer {
                state.consumer = nil
                state.producer = nil
            }
            return (state.consumer, state.producer)
        }
        consumer?.resume()
        producer?.resume()
    }

    /// Waits until something is queued, then takes up to `maximum` of it; an empty batch once the
    /// queue has ended and is empty. One consumer at a time.
    /// - Throws: the error the queue was finished with, once what was queued before it is taken.
    package func nextBatch(maximum: Int = .max) async throws -> [Element] {
        while true {
            let step = self.state.withLock { state -> Step in
                if !state.buffer.isEmpty {
                    let count = Swift.min(Swift.max(maximum, 1), state.buffer.count)
                    let batch = Array(state.buffer.prefix(count))
                    state.buffer.removeFirst(count)
                    let producer = state.buffer.count < self.limit ? state.producer : nil
                    if producer != nil { state.producer = nil }
                    return .batch(batch, producer: producer)
                }
                if let end = state.end { return .end(end) }
                return .wait
            }
            switch step {
            case .batch(let batch, let producer):
                producer?.resume()
                return batch
            case .end(let end):
                try end.get()
                return []
            case .wait:
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let resumeNow = self.state.withLock { state -> Bool in
                        guard state.buffer.isEmpty, state.end == nil else { return true }
                        state.consumer = continuation
                        return false
                    }
                    if resumeNow { continuation.resume() }
                }
            }
        }
    }
}
