#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// A change log whose records are acknowledged only once both the local log and a replica hold
/// them (issue 22, docs/scale-out.md). `local` (a data directory's write-ahead log) writes and
/// syncs them as always; once it has acknowledged a run of appended records (made it durable), a
/// thread of this log hands the run to `replicate` (a shard's JetStream publisher), in LSN order.
/// So the replica never holds a record the local log could lose in a crash: after a restart the
/// local log reaches at least as far as the replica, and what it holds beyond is what an owner
/// publishes before it answers again. The acknowledged position is the replica's, which is never
/// past the local log's: the engine answers, and hands deliveries out, only behind both.
///
/// `replicate` is called again with the same records and LSN while it throws `UNAVAILABLE` (a
/// publisher that de-duplicates by the LSN stores them once). Any other error (`FAILED_PRECONDITION`:
/// another owner appended) fails this log for good, as does a failure of `local`: it refuses
/// records, and what waits beyond the acknowledged position gets `UNAVAILABLE`. Records the local
/// log held when this log was made count as replicated already, but for `unreplicated`, its last
/// ones, which are replicated first.
package final class ReplicatedChangeLog: ChangeLog {
    /// Replicates `records`, the last of which ends before LSN `through`; returns once the replica
    /// holds them.
    package typealias Replicate = @Sendable (_ records: [WALRecord], _ through: UInt64) throws(FanoutError) -> Void

    private struct State {
        var local: LogTicket
        var replicated: UInt64
        /// Appended runs, not yet handed to `replicate`, each with the LSN after it.
        var queued: [(records: [WALRecord], through: UInt64)] = []
        var queuedThrough: UInt64
        var waiters: [(lsn: UInt64, notify: @Sendable (FanoutError?) -> Void)] = []
        var failure: FanoutError?
        var isClosed = false
        var onAcknowledged: (@Sendable (LogTicket) -> Void)?
        var onFailed: (@Sendable (UInt64) -> Void)?

        var acknowledged: LogTicket { LogTicket(lsn: min(self.local.lsn, self.replicated), epoch: self.local.epoch) }

        /// What the log has said of the records before `ticket`; nil while it has not.
        func outcome(of ticket: LogTicket) -> LogOutcome? {
            if self.acknowledged.lsn >= ticket.lsn { return .acknowledged }
            return self.failure.map { .refused($0) }
        }

        /// Whether the first queued run is durable locally, so that it may be replicated.
        var hasReplicableRun: Bool { self.queued.first.map { $0.through <= self.local.lsn } ?? false }

        /// The queued runs the local log holds durably, removed and joined.
        mutating func takeReplicable() -> (records: [WALRecord], through: UInt64)? {
            let count = self.queued.prefix { $0.through <= self.local.lsn }.count
            guard count > 0 else { return nil }
            let taken = self.queued.prefix(count)
            self.queued.removeFirst(count)
            return (taken.count == 1 ? taken.first!.records : taken.flatMap(\.records), taken.last!.through)
        }

        /// The waiters the acknowledged position has reached, removed.
        mutating func released() -> [@Sendable (FanoutError?) -> Void] {
            let through = self.acknowledged.lsn
            var released: [@Sendable (FanoutError?) -> Void] = []
            self.waiters.removeAll { waiter in
                guard waiter.lsn <= through else { return false }
                released.append(waiter.notify)
                return true
            }
            return released
        }
    }

    private let local: any ChangeLog
    private let replicate: Replicate
    private let retryInterval: Duration
    private let closeWait: Duration
    /// Orders each local append with its queueing, so records reach `replicate` in LSN order.
    private let appendOrder = Mutex(())
    private let state: ConditionLocked<State>
    private let thread = Mutex<JoinableThread?>(nil)

    /// Starts the replicating thread.
    /// - Parameters:
    ///   - unreplicated: the last records `local` holds (durably) that the replica does not: an
    ///     owner's tail logged before a crash, never published. They are replicated first, and
    ///     nothing is acknowledged before them.
    ///   - retryInterval: the wait before `replicate` is called again after `UNAVAILABLE`.
    ///   - closeWait: how long `close` waits for the replica to hold everything.
    package init(
        local: any ChangeLog,
        unreplicated: [WALRecord] = [],
        retryInterval: Duration = .milliseconds(200),
        closeWait: Duration = .seconds(5),
        replicate: @escaping Replicate
    ) {
        self.local = local
        self.replicate = replicate
        self.retryInterval = retryInterval
        self.closeWait = closeWait
        let start = local.acknowledgedTicket
        let replicated = start.lsn - min(UInt64(unreplicated.count), start.lsn)
        var state = State(local: start, replicated: replicated, queuedThrough: start.lsn)
        if !unreplicated.isEmpty { state.queued = [(unreplicated, start.lsn)] }
        self.state = ConditionLocked(state)
        local.setHandlers(
            acknowledged: { [weak self] ticket in self?.localAcknowledged(ticket) },
            failed: { [weak self] _ in self?.fail(FanoutError(.unavailable, "the local write-ahead log failed")) }
        )
        let thread = JoinableThread { self.run() }
        self.thread.withLock { $0 = thread }
    }

    // MARK: - ChangeLog

    package func checkHealthy() throws(FanoutError) {
        if let failure = self.currentFailure { throw failure }
        try self.local.checkHealthy()
    }

    /// Queues on the local log without waking its writer (`startWriting()` does); the publisher
    /// is woken at once.
    package func queue(_ records: [WALRecord]) throws(FanoutError) -> LogTicket {
        try self.appendOrder.withLock { (_: inout ()) throws(FanoutError) -> LogTicket in
            try self.checkHealthy()
            let ticket = try self.local.queue(records)
            // A local log may acknowledge without telling (the in-memory one does, at append).
            let local = self.local.acknowledgedTicket
            self.state.withLock { state in
                state.queued.append((records, ticket.lsn))
                state.queuedThrough = ticket.lsn
                if local.lsn > state.local.lsn { state.local = local }
                if state.hasReplicableRun { self.state.signal(.work) }
            }
            return ticket
        }
    }

    /// Appends records the replica holds already (this node follows the shard's stream): the
    /// replicated position moves with them, and nothing is published. Only while nothing of this
    /// log's own waits to be replicated (a follower appends no changes of its own).
    package func appendReplicated(_ records: [WALRecord]) throws(FanoutError) -> LogTicket {
        try self.appendOrder.withLock { (_: inout ()) throws(FanoutError) -> LogTicket in
            try self.checkHealthy()
            guard self.state.withLock({ $0.queued.isEmpty && $0.replicated == $0.queuedThrough }) else {
                throw FanoutError(.failedPrecondition, "this log has changes of its own to replicate: it cannot follow a replica too")
            }
            let ticket = try self.local.append(records)
            let local = self.local.acknowledgedTicket
            self.advance { state in
                state.queuedThrough = ticket.lsn
                state.replicated = ticket.lsn
                if local.lsn > state.local.lsn { state.local = local }
            }
            return ticket
        }
    }

    package func startWriting() { self.local.startWriting() }

    package var nextRecordLSN: LogTicket { self.local.nextRecordLSN }

    package var acknowledgedTicket: LogTicket { self.state.withLock { $0.acknowledged } }

    package func outcome(of ticket: LogTicket) -> LogOutcome? {
        self.state.withLock { $0.outcome(of: ticket) }
    }

    package func whenAcknowledged(_ ticket: LogTicket, _ notify: @escaping @Sendable (FanoutError?) -> Void) {
        let answer = self.state.withLock { state in
            let outcome = state.outcome(of: ticket)
            if outcome == nil { state.waiters.append((ticket.lsn, notify)) }
            return outcome
        }
        if let answer { notify(answer.refusal) }
    }

    package func waitUntilAcknowledged(_ ticket: LogTicket) throws(FanoutError) {
        let failure = self.state.withLock(waitingOn: .acknowledged) { state in
            state.acknowledged.lsn >= ticket.lsn || state.failure != nil
        } _: { state in
            state.acknowledged.lsn >= ticket.lsn ? nil : state.failure
        }
        if let failure { throw failure }
    }

    package func setHandlers(acknowledged: @escaping @Sendable (LogTicket) -> Void, failed: @escaping @Sendable (UInt64) -> Void) {
        self.state.withLock { state in
            state.onAcknowledged = acknowledged
            state.onFailed = failed
        }
    }

    package var currentFailure: FanoutError? { self.state.withLock { $0.failure } ?? self.local.currentFailure }

    package var currentStatistics: WALStatistics { self.local.currentStatistics }

    /// Closes the local log (it acknowledges what it holds), waits until the replica holds it too
    /// (at most `closeWait`, or until this log failed), then stops the thread.
    /// - Throws: `UNAVAILABLE` when the replica does not hold everything by then (NATS down): the
    ///   records stay in the local log, and an owner's next start publishes them first.
    package func close() throws(FanoutError) {
        try self.local.close()
        let local = self.local.acknowledgedTicket
        self.advance { state in
            if local.lsn > state.local.lsn { state.local = local }
        }
        let end = self.state.withLock { $0.queuedThrough }
        // The local log holds everything now: what is acknowledged is what the replica holds.
        try? self.waitUntilAcknowledged(LogTicket(lsn: end, epoch: local.epoch), atMost: self.closeWait)
        self.state.withLock { state in
            state.isClosed = true
            self.state.broadcast(.work)
        }
        self.thread.withLock { $0 }?.join()
        let replicated = self.state.withLock { $0.replicated }
        guard replicated >= end else {
            let error = FanoutError(
                .unavailable,
                "closed while the replica holds the log only through LSN \(replicated) of \(end): those records are in the local log, and the next start publishes them"
            )
            self.fail(error, rebuildingTheEngine: false)
            throw error
        }
    }

    // MARK: - The two positions

    private func localAcknowledged(_ ticket: LogTicket) {
        self.advance { $0.local = ticket }
    }

    /// Changes a position and tells the engine and the waiters what that acknowledged.
    private func advance(_ change: (inout State) -> Void) {
        let (handler, acknowledged, released) = self.state.withLock { state in
            let before = state.acknowledged
            change(&state)
            let after = state.acknowledged
            self.state.broadcast(.acknowledged)
            if state.hasReplicableRun { self.state.signal(.work) }
            return (after.lsn > before.lsn ? state.onAcknowledged : nil, after, state.released())
        }
        handler?(acknowledged)
        for notify in released { notify(nil) }
    }

    /// Fails this log for good: it refuses records, and every waiter hears `error`. The engine's
    /// failure handler runs first (it rebuilds the state from what is acknowledged), unless the
    /// log is closing.
    private func fail(_ error: FanoutError, rebuildingTheEngine: Bool = true) {
        let (handler, through, waiters) = self.state.withLock { state in
            guard state.failure == nil else { return (nil as (@Sendable (UInt64) -> Void)?, UInt64(0), [] as [@Sendable (FanoutError?) -> Void]) }
            state.failure = error
            let waiters = state.waiters.map(\.notify)
            state.waiters = []
            self.state.broadcast(.acknowledged)
            self.state.broadcast(.work)
            return (rebuildingTheEngine ? state.onFailed : nil, state.acknowledged.lsn, waiters)
        }
        handler?(through)
        for notify in waiters { notify(error) }
    }

    /// The replicating thread: takes what is queued and durable locally, replicates it (again
    /// while the replica is unavailable), moves the replicated position; until closed and drained,
    /// or failed.
    private func run() {
        while true {
            let taken: (records: [WALRecord], through: UInt64)? = self.state.withLock(waitingOn: .work) { state in
                state.hasReplicableRun || state.isClosed || state.failure != nil
            } _: { state in
                guard state.failure == nil else { return nil }
                return state.takeReplicable()
            }
            guard let (records, through) = taken else { return }
            while true {
                do {
                    try self.replicate(records, through)
                    self.advance { state in state.replicated = through }
                    break
                } catch where error.code == .unavailable {
                    if self.state.withLock({ $0.isClosed || $0.failure != nil }) {
                        self.fail(FanoutError(.unavailable, "closed before the replica held every record: \(error.message)"), rebuildingTheEngine: false)
                        return
                    }
                    let (seconds, attoseconds) = self.retryInterval.components
                    var pause = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
                    nanosleep(&pause, nil)
                } catch {
                    self.fail(FanoutError(.unavailable, "replication refused: \(error.message)"))
                    return
                }
            }
        }
    }
}
