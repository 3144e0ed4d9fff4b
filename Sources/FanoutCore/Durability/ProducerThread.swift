/// Runs a producer on a thread of its own and hands what it makes to the consuming thread through
/// a bounded buffer, so the two overlap: recovery decodes the next snapshot records while the
/// caller applies the last ones.
///
/// The producer gets an `emit` function that blocks while the buffer is full and returns `false`
/// once the consumer has stopped (the producer should then return). Whatever the producer throws
/// (a `Failure`) is rethrown by `next()` after everything emitted before it.
final class ProducerThread<Element, Failure: Error>: @unchecked Sendable {
    // Safe to share: every field below is read and written under `state`'s lock.
    private let state = ConditionLock()
    private let capacity: Int
    private var buffer: [Element] = []
    private var isFinished = false
    private var isStopped = false
    private var failure: Failure?
    /// Set once in `init`; used by the consuming thread only.
    private var thread: JoinableThread?

    /// Starts `produce` on a new thread; at most `capacity` elements wait for the consumer.
    init(capacity: Int, _ produce: @escaping (_ emit: (Element) -> Bool) throws(Failure) -> Void) {
        self.capacity = max(1, capacity)
        // The producer's job holds this object until it returns (a thread never joined is
        // detached when this object goes).
        let job = Job(producer: self, produce: produce)
        self.thread = JoinableThread(job.run)
    }

    /// The next element, or `nil` when the producer has returned. Throws what the producer threw.
    func next() throws(Failure) -> Element? {
        self.state.lock()
        while self.buffer.isEmpty && !self.isFinished {
            self.state.wait(.work)
        }
        if !self.buffer.isEmpty {
            let element = self.buffer.removeFirst()
            self.state.signal(.acknowledged)
            self.state.unlock()
            return element
        }
        let failure = self.failure
        self.state.unlock()
        if let failure { throw failure }
        return nil
    }

    /// Tells the producer to stop and waits for its thread to end (the consumer gave up, or is done).
    /// Call it once the consumer is done, from the consuming thread.
    func stop() {
        self.state.withLock {
            self.isStopped = true
            self.buffer.removeAll()
            self.state.broadcast(.acknowledged)
        }
        self.thread?.join()
    }

    private func emit(_ element: Element) -> Bool {
        self.state.lock()
        defer { self.state.unlock() }
        while self.buffer.count >= self.capacity && !self.isStopped {
            self.state.wait(.acknowledged)
        }
        guard !self.isStopped else { return false }
        self.buffer.append(element)
        self.state.signal(.work)
        return true
    }

    private func finish(_ failure: Failure?) {
        self.state.withLock {
            self.isFinished = true
            self.failure = failure
            self.state.broadcast(.work)
        }
    }

    /// What the thread runs: the producer, then the end of the stream.
    private final class Job {
        let producer: ProducerThread<Element, Failure>
        let produce: (_ emit: (Element) -> Bool) throws(Failure) -> Void

        init(producer: ProducerThread<Element, Failure>, produce: @escaping (_ emit: (Element) -> Bool) throws(Failure) -> Void) {
            self.producer = producer
            self.produce = produce
        }

        func run() {
            do throws(Failure) {
                try self.produce(self.producer.emit)
                self.producer.finish(nil)
            } catch {
                self.producer.finish(error)
            }
        }
    }
}
