internal import DequeModule
internal import FanoutModel

/// Elements handed from producers to one consuming task, which takes what has arrived in batches
/// (`nextBatch` waits only while nothing is queued). The queue ends with `finish`: the consumer
/// still gets what was queued, then an empty batch, or the error it was finished with.
///
/// What a producer appends at once is kept as the array it came in (an attachment's deliveries:
/// one array per DELIVERIES frame), and a batch that is one such array whole is handed over as it
/// is: an element is copied only when batches are cut or joined. (The type is internal to this
/// module so that it is compiled for its element type: generic code called from another module
/// runs unspecialized.)
final class BatchQueue<Element: Sendable>: Sendable {
    private struct State {
        /// What is queued, in order: arrays as they were appended, the first `taken` elements of
        /// the first one already taken.
        var arrays = Deque<[Element]>()
        var taken = 0
        var end: Result<Void, any Error>?
        var consumer: CheckedContinuation<Void, Never>?

        /// Takes up to `maximum` (at least 1) elements from the front.
        mutating func take(_ maximum: Int) -> [Element] {
            var batch: [Element] = []
            while batch.count < maximum, let first = self.arrays.first {
                let wanted = maximum - batch.count
                let left = first.count - self.taken
                if batch.isEmpty, self.taken == 0, left <= wanted {
                    batch = self.arrays.removeFirst()
                    continue
                }
                let count = Swift.min(wanted, left)
                batch.append(contentsOf: first[self.taken..<(self.taken + count)])
                self.taken += count
                if self.taken == first.count {
                    self.arrays.removeFirst()
                    self.taken = 0
                }
            }
            return batch
        }
    }

    private enum Step {
        case batch([Element])
        case end(Result<Void, any Error>)
        case wait
    }

    private let state = Locked(State())

    init() {}

    /// Queues the element, unless the queue has ended (then it is dropped).
    func append(_ element: Element) {
        self.enqueue { state in
            if state.arrays.isEmpty {
                state.arrays.append([element])
            } else {
                state.arrays[state.arrays.count - 1].append(element)
            }
        }
    }

    /// Queues the elements in order (with one lock and at most one wake-up), unless the queue has
    /// ended.
    func append(contentsOf elements: [Element]) {
        guard !elements.isEmpty else { return }
        self.enqueue { $0.arrays.append(elements) }
    }

    /// Adds to the queue under the lock, unless the queue has ended, and wakes the consumer.
    private func enqueue(_ add: (inout State) -> Void) {
        let consumer = self.state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard state.end == nil else { return nil }
            add(&state)
            defer { state.consumer = nil }
            return state.consumer
        }
        consumer?.resume()
    }

    /// Ends the queue; a waiting consumer goes on.
    func finish(throwing error: (any Error)? = nil) {
        let consumer = self.state.withLock { state in
            if state.end == nil {
                state.end = error.map { .failure($0) } ?? .success(())
            }
            defer { state.consumer = nil }
            return state.consumer
        }
        consumer?.resume()
    }

    /// Waits until something is queued, then takes up to `maximum` of it; an empty batch once the
    /// queue has ended and is empty. One consumer at a time.
    /// - Throws: the error the queue was finished with, once what was queued before it is taken.
    func nextBatch(maximum: Int = .max) async throws -> [Element] {
        while true {
            let step = self.state.withLock { state -> Step in
                if !state.arrays.isEmpty {
                    return .batch(state.take(Swift.max(maximum, 1)))
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
                        guard state.arrays.isEmpty, state.end == nil else { return true }
                        state.consumer = continuation
                        return false
                    }
                    if resumeNow { continuation.resume() }
                }
            }
        }
    }
}
