/// A change log that keeps its records in memory: for tests of what the engine logs and when it
/// answers, and the shape a replicated log takes behind the engine. Records are acknowledged at
/// once (`.immediate`) or when `acknowledge(through:)` says so (`.manual`: a test holds them back).
package final class InMemoryChangeLog: ChangeLog {
    package enum Acknowledgement: Sendable {
        case immediate
        case manual
    }

    /// Everything the log holds, changed only by the transitions below, with `state`'s lock held.
    private struct State: Sendable {
        var records: [WALRecord] = []
        /// Records before this LSN are acknowledged.
        var acknowledged: UInt64 = 0
        var isClosed = false
        var statistics = WALStatistics()
        var waiters: [(lsn: UInt64, notify: @Sendable (FanoutError?) -> Void)] = []
        var onAcknowledged: (@Sendable (LogTicket) -> Void)?

        var next: LogTicket { LogTicket(lsn: UInt64(self.records.count), epoch: 0) }

        mutating func append(_ records: [WALRecord], acknowledgeAtOnce: Bool) throws(FanoutError) -> LogTicket {
            guard !self.isClosed else { throw FanoutError(.unavailable, "the engine is closing") }
            self.records.append(contentsOf: records)
            self.statistics.records += records.count
            self.statistics.batches += 1
            if acknowledgeAtOnce { self.acknowledged = UInt64(self.records.count) }
            return self.next
        }

        /// Moves the acknowledged position to `lsn` (at most what was appended); returns the
        /// waiters it releases.
        mutating func acknowledge(through lsn: UInt64) -> [@Sendable (FanoutError?) -> Void] {
            self.acknowledged = max(self.acknowledged, min(lsn, UInt64(self.records.count)))
            var released: [@Sendable (FanoutError?) -> Void] = []
            self.waiters.removeAll { waiter in
                guard waiter.lsn <= self.acknowledged else { return false }
                released.append(waiter.notify)
                return true
            }
            return released
        }
    }

    private let acknowledgement: Acknowledgement
    private let state = ConditionLocked(State())
    /// Tells the waiters an acknowledgement releases newest first (`.manual`): callers must not
    /// rely on the order callbacks arrive in (a waiter registered while the writer is telling the
    /// others hears first), and tests hold them to it.
    private let notifiesNewestFirst: Bool

    package init(acknowledgement: Acknowledgement = .immediate, notifiesNewestFirst: Bool = false) {
        self.acknowledgement = acknowledgement
        self.notifiesNewestFirst = notifiesNewestFirst
    }

    /// The records appended so far, in order.
    package var records: [WALRecord] {
        self.state.withLock { $0.records }
    }

    /// Acknowledges every record before `lsn` (`.manual`); the engine then answers and hands out
    /// what waited for them.
    package func acknowledge(through lsn: UInt64) {
        let (released, handler, ticket) = self.state.withLock { state in
            let released = state.acknowledge(through: lsn)
            self.state.broadcast(.acknowledged)
            return (released, state.onAcknowledged, LogTicket(lsn: state.acknowledged, epoch: 0))
        }
        handler?(ticket)
        for notify in self.notifiesNewestFirst ? released.reversed() : released { notify(nil) }
    }

    // MARK: - ChangeLog

    package func checkHealthy() throws(FanoutError) {
        try self.state.withLock { (state: inout State) throws(FanoutError) in
            guard !state.isClosed else { throw FanoutError(.unavailable, "the engine is closing") }
        }
    }

    package func queue(_ records: [WALRecord]) throws(FanoutError) -> LogTicket {
        let atOnce = self.acknowledgement == .immediate
        return try self.state.withLock { (state: inout State) throws(FanoutError) -> LogTicket in
            try state.append(records, acknowledgeAtOnce: atOnce)
        }
    }

    /// Nothing to wake: records are acknowledged at once, or when a test says so.
    package func startWriting() {}

    package var nextRecordLSN: LogTicket {
        self.state.withLock { $0.next }
    }

    package var acknowledgedTicket: LogTicket {
        self.state.withLock { LogTicket(lsn: $0.acknowledged, epoch: 0) }
    }

    /// This log never refuses a record it took.
    package func outcome(of ticket: LogTicket) -> LogOutcome? {
        self.state.withLock { $0.acknowledged >= ticket.lsn ? .acknowledged : nil }
    }

    /// The callbacks `whenAcknowledged` holds until an acknowledgement releases them.
    package var waiterCount: Int {
        self.state.withLock { $0.waiters.count }
    }

    package func whenAcknowledged(_ ticket: LogTicket, _ notify: @escaping @Sendable (FanoutError?) -> Void) {
        let ready = self.state.withLock { state in
            guard state.acknowledged < ticket.lsn else { return true }
            state.waiters.append((ticket.lsn, notify))
            return false
        }
        if ready { notify(nil) }
    }

    package func waitUntilAcknowledged(_ ticket: LogTicket) throws(FanoutError) {
        self.state.withLock(waitingOn: .acknowledged) { $0.acknowledged >= ticket.lsn } _: { _ in }
    }

    package func setHandlers(acknowledged: @escaping @Sendable (LogTicket) -> Void, failed: @escaping @Sendable (UInt64) -> Void) {
        // This log never fails.
        self.state.withLock { $0.onAcknowledged = acknowledged }
    }

    package var currentFailure: FanoutError? {
        nil
    }

    package var currentStatistics: WALStatistics {
        self.state.withLock { $0.statistics }
    }

    package func close() throws(FanoutError) {
        let released = self.state.withLock { state in
            state.isClosed = true
            return state.acknowledge(through: .max)
        }
        for notify in released { notify(nil) }
    }
}
