#if canImport(Glibc)
import Glibc
#endif

/// What the WAL writer's callers and its thread share (`WALWriter.shared`, one lock): the queue of
/// records, the LSN positions, the failure and its epochs, closing and rolling, and who waits for
/// what. Each transition is a mutating method that does no I/O; the wake-ups it decides are
/// returned, and the writer performs them with the lock still held.
struct WALWriterState: Sendable {
    /// The condition variable a blocked thread waits on.
    struct WaitCondition: @unchecked Sendable, Equatable {
        // Safe to share: it is signalled and waited on only with the state's lock held, and its
        // owner destroys it only after removing it from the state under that lock.
        let pointer: UnsafeMutablePointer<pthread_cond_t>
    }

    /// A thread blocked until an LSN is acknowledged, on its own condition variable.
    typealias BlockedWaiter = (lsn: UInt64, condition: WaitCondition)
    /// Told once an LSN is acknowledged (nil) or refused (the refusal): a suspended task's
    /// continuation, or an event loop's callback.
    typealias NotifiedWaiter = (lsn: UInt64, notify: @Sendable (FanoutError?) -> Void)

    /// What the writer thread takes to write: the queued records and what else was asked.
    struct Work {
        /// The records, as the appends gave them (each append's array kept whole).
        var appends: [[WALRecord]]
        /// How many records `appends` holds.
        var count: Int
        var firstLSN: UInt64
        var closing: Bool
        var roll: Bool
    }

    /// Waiters to wake, decided by a transition.
    struct Wakeups {
        var conditions: [WaitCondition] = []
        var notifications: [(notify: @Sendable (FanoutError?) -> Void, refusal: FanoutError?)] = []

        /// Signals the blocked threads; call with the lock held (a woken thread's condition
        /// variable lives only while it waits under that lock).
        func signalBlocked() {
            for condition in self.conditions { pthread_cond_signal(condition.pointer) }
        }

        /// Tells the notified waiters; call with the lock released (a callback may take other
        /// locks, or append to the log).
        func notify() {
            for (notify, refusal) in self.notifications { notify(refusal) }
        }
    }

    /// The queued appends, each array as its caller gave it: appending keeps a reference to the
    /// array rather than copying every record into one (a copy retains each record's strings
    /// and arrays, and the caller's array then releases them: twice per reference per record).
    private(set) var queue: [[WALRecord]] = []
    /// How many records `queue` holds.
    private(set) var queuedCount = 0
    private(set) var nextLSN: UInt64
    /// Every LSN below this is acknowledged (durable as the durability defines).
    private(set) var acknowledgedLSN: UInt64
    /// Increased at each failure; `acknowledgedAtFailure[e]` is what epoch `e` acknowledged.
    private(set) var epoch = 0
    private var acknowledgedAtFailure: [Int: UInt64] = [:]
    private(set) var failure: FanoutError?
    /// True while a failure's handler runs: no caller is told an outcome until it is done.
    private var settling = false
    private(set) var closing = false
    /// False once the writer thread has stopped.
    private(set) var running = true
    private var rollRequested = false
    /// Rolls done (a caller of `roll` waits for it to move).
    private(set) var rolls = 0
    private(set) var statistics = WALStatistics()
    /// Runs on the writer thread after each acknowledged batch (outside the lock).
    var acknowledgementHandler: (@Sendable (LogTicket) -> Void)?
    /// Runs on the writer thread after a failure, before any caller is told.
    var failureHandler: (@Sendable (UInt64) -> Void)?
    private var blockedWaiters: [BlockedWaiter] = []
    private var notifiedWaiters: [NotifiedWaiter] = []

    init(nextLSN: UInt64) {
        self.nextLSN = nextLSN
        self.acknowledgedLSN = nextLSN
    }

    // MARK: - Callers

    /// Why records are refused now: the failure, or closing; nil while the log takes them.
    var refusalNow: FanoutError? {
        if let failure = self.failure { return failure }
        return self.closing ? FanoutError(.unavailable, "the engine is closing") : nil
    }

    /// Queues `records`; returns the ticket of the last one.
    mutating func append(_ records: [WALRecord]) throws(FanoutError) -> LogTicket {
        if let refusal = self.refusalNow { throw refusal }
        if !records.isEmpty {
            self.queue.append(records)
            self.queuedCount += records.count
        }
        self.nextLSN += UInt64(records.count)
        return self.nextTicket
    }

    /// The LSN the next record gets, in this epoch.
    var nextTicket: LogTicket { LogTicket(lsn: self.nextLSN, epoch: self.epoch) }

    /// Every record before this is acknowledged, in this epoch.
    var acknowledgedTicket: LogTicket { LogTicket(lsn: self.acknowledgedLSN, epoch: self.epoch) }

    /// Whether the records before `ticket` are acknowledged (`true`), refused by a failure
    /// (`false`), or neither yet (nil).
    func outcome(of ticket: LogTicket) -> Bool? {
        if self.settling { return self.acknowledgedLSN >= ticket.lsn && ticket.epoch == self.epoch ? true : nil }
        if ticket.epoch != self.epoch {
            return ticket.lsn <= (self.acknowledgedAtFailure[ticket.epoch] ?? 0)
        }
        if self.acknowledgedLSN >= ticket.lsn { return true }
        return self.failure == nil ? nil : false
    }

    /// `outcome(of:)` with the refusal a refused caller is told.
    func logOutcome(of ticket: LogTicket) -> LogOutcome? {
        self.outcome(of: ticket).map { $0 ? .acknowledged : .refused(self.refusal) }
    }

    /// What a refused caller is told.
    var refusal: FanoutError {
        self.failure ?? FanoutError(.unavailable, "the write-ahead log failed before the change was durable")
    }

    mutating func addWaiter(_ waiter: BlockedWaiter) { self.blockedWaiters.append(waiter) }

    /// Forgets a blocked waiter (a no-op when the writer already removed it as it woke it).
    mutating func removeWaiter(_ condition: WaitCondition) {
        self.blockedWaiters.removeAll { $0.condition == condition }
    }

    mutating func addWaiter(_ waiter: NotifiedWaiter) { self.notifiedWaiters.append(waiter) }

    /// Asks the writer for a new segment; returns the roll count to wait for.
    mutating func requestRoll() -> Int {
        self.rollRequested = true
        return self.rolls + 1
    }

    mutating func startClosing() { self.closing = true }

    // MARK: - The writer thread

    var hasWork: Bool { !self.queue.isEmpty || self.closing || self.rollRequested }

    /// Takes everything queued, and the roll and close requests.
    mutating func takeWork() -> Work {
        let appends = self.queue
        let count = self.queuedCount
        self.queue.removeAll(keepingCapacity: true)
        self.queuedCount = 0
        defer { self.rollRequested = false }
        return Work(appends: appends, count: count, firstLSN: self.nextLSN - UInt64(count), closing: self.closing, roll: self.rollRequested)
    }

    mutating func rolled() { self.rolls += 1 }

    /// A batch of `count` records (`bytes` on disk) is written, and synced if `synced`.
    mutating func acknowledge(through lsn: UInt64, count: Int, bytes: Int, synced: Bool) -> Wakeups {
        self.acknowledgedLSN = lsn
        self.statistics.records += count
        self.statistics.batches += 1
        self.statistics.bytes += bytes
        if synced { self.statistics.syncs += 1 }
        return self.wakeups()
    }

    /// An interval sync on its own.
    mutating func synced() { self.statistics.syncs += 1 }

    /// A write or sync failed: records are refused from now on; callers hear nothing until
    /// `settle`. Returns what is acknowledged (the state the failure handler rebuilds).
    mutating func fail(_ failure: FanoutError) -> UInt64 {
        self.failure = failure
        self.settling = true
        return self.acknowledgedLSN
    }

    /// The failure handler is done: the refused records are dropped and their LSNs given out again
    /// in a new epoch; every waiter hears its outcome.
    mutating func settle() -> Wakeups {
        self.acknowledgedAtFailure[self.epoch] = self.acknowledgedLSN
        self.epoch += 1
        self.queue.removeAll()
        self.queuedCount = 0
        self.nextLSN = self.acknowledgedLSN
        self.settling = false
        return self.wakeups()
    }

    /// The log writes again.
    mutating func recovered() { self.failure = nil }

    /// The writer thread has stopped.
    mutating func stopped() { self.running = false }

    /// Removes and returns the waiters that can go: acknowledged, or refused once settled.
    private mutating func wakeups() -> Wakeups {
        var wakeups = Wakeups()
        let acknowledged = self.acknowledgedLSN
        let failed = self.failure != nil
        self.blockedWaiters.removeAll { waiter in
            guard waiter.lsn <= acknowledged || failed else { return false }
            wakeups.conditions.append(waiter.condition)
            return true
        }
        guard !self.settling else { return wakeups }
        guard !self.notifiedWaiters.isEmpty else { return wakeups }
        let refusal = failed ? self.refusal : nil
        wakeups.notifications.reserveCapacity(self.notifiedWaiters.count)
        self.notifiedWaiters.removeAll { waiter in
            if waiter.lsn <= acknowledged {
                wakeups.notifications.append((waiter.notify, nil))
                return true
            }
            if let refusal {
                wakeups.notifications.append((waiter.notify, refusal))
                return true
            }
            return false
        }
        return wakeups
    }
}
