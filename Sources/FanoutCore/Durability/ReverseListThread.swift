/// Makes a replay's reverse-list entries (`SlotTopicLists`, a topic index's slot -> topics map) on
/// a thread of its own, while the replaying thread checks the next subscription records and adds
/// them to the topics' sets: the two halves of a subscription's replay run on two cores.
///
/// Between `begin` and `end` the thread holds the lists; jobs are done in the order they came.
final class ReverseListThread: @unchecked Sendable {
    // Safe to share: `jobs`, `isWorking`, `failure` and `isStopped` are read and written under
    // `state`'s lock, `thread` by the calling thread only; `lists` is the thread's while it works
    // on jobs it took under the lock (`isWorking`), and the caller's in `begin` and `end`, which
    // wait for no job to be left.
    private let state = ConditionLock()
    private let capacity: Int
    private var lists = SlotTopicLists()
    private var jobs: [Job] = []
    private var isWorking = false
    private var failure: FanoutError?
    private var isStopped = false
    private var thread: JoinableThread?

    private struct Job {
        var lsn: UInt64
        var topic: UInt32
        var slots: [UInt32]
    }

    /// Starts the thread; at most `capacity` jobs wait for it. Call `stop()` once done with it.
    init(capacity: Int = 64) {
        self.capacity = max(1, capacity)
        // The thread holds this object until `stop()` ends it.
        self.thread = JoinableThread(self.run)
    }

    /// Hands the thread `lists` to make entries in, until `end()`.
    func begin(_ lists: SlotTopicLists) {
        self.state.withLock {
            self.lists = lists
        }
    }

    /// Queues the entries of topic `id` for each of `slots` (which a subscription record at `lsn`
    /// added to the topic's set); waits while `capacity` jobs wait.
    /// - Throws: `INTERNAL` when an earlier job found a full list (see `end()`).
    func append(_ id: UInt32, to slots: [UInt32], lsn: UInt64) throws(FanoutError) {
        guard !slots.isEmpty else { return }
        self.state.lock()
        defer { self.state.unlock() }
        while self.jobs.count >= self.capacity && self.failure == nil {
            self.state.signal(.work)
            self.state.wait(.acknowledged)
        }
        if let failure = self.failure { throw failure }
        self.jobs.append(Job(lsn: lsn, topic: id, slots: slots))
        // A few jobs per wake-up: a wake-up per job cost both threads more than the job.
        if self.jobs.count == Self.jobsPerWakeUp { self.state.signal(.work) }
    }

    private static let jobsPerWakeUp = 8

    /// Waits until every queued entry is made, and returns the lists.
    /// - Throws: `INTERNAL` when a slot's list was full (65535 topics): the log names more
    ///   subscriptions of one installation than it can have been acknowledged with.
    func end() throws(FanoutError) -> SlotTopicLists {
        self.state.lock()
        defer { self.state.unlock() }
        self.state.signal(.work)
        while !self.jobs.isEmpty || self.isWorking {
            self.state.wait(.acknowledged)
        }
        if let failure = self.failure { throw failure }
        var lists = SlotTopicLists()
        swap(&lists, &self.lists)
        return lists
    }

    /// Ends the thread (dropping jobs not yet done) and waits for it; from the calling thread.
    func stop() {
        self.state.withLock {
            self.isStopped = true
            self.jobs.removeAll()
            self.state.broadcast(.work)
        }
        self.thread?.join()
    }

    /// The thread's loop: takes every waiting job at once, makes their entries outside the lock.
    private func run() {
        var taken: [Job] = []
        self.state.lock()
        while true {
            while self.jobs.isEmpty && !self.isStopped {
                self.state.wait(.work)
            }
            if self.isStopped { break }
            swap(&taken, &self.jobs)
            let failed = self.failure != nil
            self.isWorking = true
            self.state.broadcast(.acknowledged)
            self.state.unlock()

            var failure: FanoutError?
            if !failed {
                for job in taken {
                    if let slot = self.lists.append(job.topic, toEach: job.slots) {
                        failure = FanoutError(
                            .internal,
                            "the subscription at LSN \(job.lsn) names slot \(slot), which already has the most topics a slot can have (65535)"
                        )
                        break
                    }
                }
            }

            taken.removeAll(keepingCapacity: true)
            self.state.lock()
            self.isWorking = false
            if let failure { self.failure = failure }
            self.state.broadcast(.acknowledged)
        }
        self.state.unlock()
    }
}
