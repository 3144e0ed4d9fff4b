internal import DequeModule

/// Where the engine puts the deliveries it hands to one consumer, and where the consumer takes
/// them from (`next()` or `poll`). The engine pushes once the deliveries' changes are durable
/// (see `HandOutQueue`); the sink has its own lock, never held while calling out. At most
/// `credit` deliveries are ever buffered here.
final class DeliverySink: Sendable {
    private struct State {
        /// Hand-outs as pushed, oldest first, each non-empty and kept whole: a poll takes a whole
        /// hand-out without copying its deliveries. The first one's deliveries before `taken`
        /// are gone already.
        var handOuts = Deque<[Delivery]>()
        var taken = 0
        var waiter: CheckedContinuation<Delivery?, Never>?
        /// Told once when deliveries arrive or the stream ends (`poll(maximum:orWhenReady:)`).
        var readiness: (@Sendable () -> Void)?
        var isFinished = false
        var isCancelled = false

        var isEmpty: Bool { self.handOuts.isEmpty }

        /// Removes and returns the oldest buffered delivery.
        mutating func popFirst() -> Delivery? {
            guard let first = self.handOuts.first else { return nil }
            defer { self.advance(by: 1, of: first.count) }
            return first[self.taken]
        }

        /// Removes and returns up to `maximum` buffered deliveries, oldest first.
        mutating func take(maximum: Int) -> [Delivery] {
            var deliveries: [Delivery] = []
            while deliveries.count < maximum, let first = self.handOuts.first {
                let count = min(maximum - deliveries.count, first.count - self.taken)
                if deliveries.isEmpty && count == first.count {
                    deliveries = first
                } else {
                    deliveries.append(contentsOf: first[self.taken..<(self.taken + count)])
                }
                self.advance(by: count, of: first.count)
            }
            return deliveries
        }

        /// Removes up to `maximum` buffered deliveries, oldest first, and returns them as slices
        /// of the hand-outs they came in: no delivery is copied (`take` copies when it splits a
        /// hand-out or joins several).
        mutating func takeSlices(maximum: Int) -> [ArraySlice<Delivery>] {
            var slices: [ArraySlice<Delivery>] = []
            var remaining = maximum
            while remaining > 0, let first = self.handOuts.first {
                let count = min(remaining, first.count - self.taken)
                slices.append(first[self.taken..<(self.taken + count)])
                remaining -= count
                self.advance(by: count, of: first.count)
            }
            return slices
        }

        private mutating func advance(by count: Int, of firstCount: Int) {
            self.taken += count
            if self.taken == firstCount {
                self.handOuts.removeFirst()
                self.taken = 0
            }
        }
    }

    private let state = Locked(State())

    /// Pushes deliveries in order, under one acquisition of the lock.
    func push(contentsOf deliveries: [Delivery]) {
        guard let first = deliveries.first else { return }
        let (waiter, readiness) = self.state.withLock { state -> (CheckedContinuation<Delivery?, Never>?, (@Sendable () -> Void)?) in
            guard !state.isFinished else { return (nil, nil) }
            defer { state.readiness = nil }
            if let waiter = state.waiter {
                state.waiter = nil
                // Nothing is buffered while a caller waits: the rest starts the buffer.
                if deliveries.count > 1 {
                    state.handOuts.append(deliveries)
                    state.taken = 1
                }
                return (waiter, state.readiness)
            }
            state.handOuts.append(deliveries)
            return (nil, state.readiness)
        }
        waiter?.resume(returning: first)
        readiness?()
    }

    /// Ends the stream: `next()` returns what is buffered, then `nil`.
    func finish() {
        let (waiter, readiness) = self.state.withLock { state -> (CheckedContinuation<Delivery?, Never>?, (@Sendable () -> Void)?) in
            state.isFinished = true
            defer {
                state.waiter = nil
                state.readiness = nil
            }
            return (state.waiter, state.readiness)
        }
        waiter?.resume(returning: nil)
        readiness?()
    }

    /// The next delivery, waiting for one; `nil` once finished or when the task is cancelled.
    /// One caller at a time.
    func next() async -> Delivery? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Delivery?, Never>) in
                let ready = self.state.withLock { state -> Delivery?? in
                    if let delivery = state.popFirst() { return .some(delivery) }
                    if state.isFinished || state.isCancelled { return .some(nil) }
                    state.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            let waiter = self.state.withLock { state -> CheckedContinuation<Delivery?, Never>? in
                state.isCancelled = true
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(returning: nil)
        }
    }

    /// Takes up to `maximum` buffered deliveries without waiting.
    func poll(maximum: Int) -> [Delivery] {
        self.state.withLock { $0.take(maximum: maximum) }
    }

    /// Takes up to `maximum` buffered deliveries; when there are none, `ready` is called once
    /// (outside the sink's lock, on the pushing thread) when some arrive or the stream ends. `finished`
    /// says the stream has ended (nothing more will arrive, nothing is called).
    func poll(maximum: Int, orWhenReady ready: @escaping @Sendable () -> Void) -> (deliveries: [Delivery], finished: Bool) {
        self.poll(orWhenReady: ready) { $0.take(maximum: maximum) }
    }

    /// `poll(maximum:orWhenReady:)` with the deliveries as slices of their hand-outs, none copied.
    func pollSlices(maximum: Int, orWhenReady ready: @escaping @Sendable () -> Void) -> (slices: [ArraySlice<Delivery>], finished: Bool) {
        self.poll(orWhenReady: ready) { $0.takeSlices(maximum: maximum) }
    }

    private func poll<Taken: Collection>(
        orWhenReady ready: @escaping @Sendable () -> Void,
        _ take: (inout State) -> Taken
    ) -> (Taken, finished: Bool) where Taken: ExpressibleByArrayLiteral {
        self.state.withLock { state in
            guard state.isEmpty else { return (take(&state), false) }
            guard !state.isFinished else { return ([], true) }
            state.readiness = ready
            return ([], false)
        }
    }
}
