/// A change log that keeps its records in memory: for tests of what the engine logs and when it
/// answers, and the shape a replicated log takes behind the engine. Records are acknowledged at
/// once (`.immediate`) or when `acknowledge(through:)` says so (`.manual`: a test holds them back).
package final class InMemoryChangeLog: ChangeLog {
    package enum Acknowledgement: Sendable {
        case immediate
        case manual
    }

    /// Everything the log holds, changed only by the transitions below, under `lock`.
    private struct State {
        var records: [WALRecord] = []
        /// Records before this LSN are acknowledged.
        var acknowledged: UInt64 = 0
        var isClosed = false
        var statistics = WALStatistics()
        var waiters: [(lsn: UInt64, continuation: CheckedContinuation<Void, Never>)] = []
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
        mutating func acknowledge(through lsn: UInt64) -> [CheckedContinuation<Void, Never>] {
            self.acknowledged = max(self.acknowledged, min(lsn, UInt64(self.records.count)))
            var released: [CheckedContinuation<Void, Never>] = []
            self.waiters.removeAll { waiter in
                guard waiter.lsn <= self.acknowledged else { return false }
                released.append(waiter.continuation)
                return true
            }
            return released
        }
    }

    private let acknowledgement: Acknowledgement
    private let lock = ConditionLock()
    nonisolated(unsafe) private var state = State()
    // Safe: `state` is read and written only with `lock` held (every method below).

    package init(acknowledgement: Acknowledgement = .immediate) {
        self.acknowledgement = acknowledgement
    }

    /// The records appended so far, in order.
    package var records: [WALRecord] {
        self.lock.withLock { self.state.records }
    }

    /// Acknowledges every record before `lsn` (`.manual`); the engine then answers and hands out
    /// what waited for them.
    package func acknowledge(through lsn: UInt64) {
        let (released, handler, ticket) = self.lock.withLock {
            let released = self.state.acknowledge(through: lsn)
            self.lock.broadcast(.acknowledged)
            return (released, self.state.onAcknowledged, LogTicket(lsn: self.state.acknowledged, epoch: 0))
        }
        handler?(ticket)
        for continuation in released { continuation.resume() }
    }

    // MARK: - ChangeLog

    package func checkHealthy() throws(FanoutError) {
        try self.lock.withLock { () throws(FanoutError) in
            guard !self.state.isClosed else { throw FanoutError(.unavailable, "the engine is closing") }
        }
    }

    package func append(_ records: [WALRecord]) throws(FanoutError) -> LogTicket {
        let atOnce = self.acknowledgement == .immediate
        return try self.lock.withLock { () throws(FanoutError) -> LogTicket in
            try self.state.append(records, acknowledgeAtOnce: atOnce)
        }
    }

    package var nextRecordLSN: LogTicket {
        self.lock.withLock { self.state.next }
    }

    package var acknowledgedTicket: LogTicket {
        self.lock.withLock { LogTicket(lsn: self.state.acknowledged, epoch: 0) }
    }

    package func acknowledgement(of ticket: LogTicket) async throws(FanoutError) {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = self.lock.withLock {
                guard self.state.acknowledged < ticket.lsn else { return true }
                self.state.waiters.append((ticket.lsn, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    package func waitUntilAcknowledged(_ ticket: LogTicket) throws(FanoutError) {
        self.lock.withLock {
            while self.state.acknowledged < ticket.lsn { self.lock.wait(.acknowledged) }
        }
    }

    package func setHandlers(acknowledged: @escaping @Sendable (LogTicket) -> Void, failed: @escaping @Sendable (UInt64) -> Void) {
        // This log never fails.
        self.lock.withLock { self.state.onAcknowledged = acknowledged }
    }

    package var currentFailure: FanoutError? {
        nil
    }

    package var currentStatistics: WALStatistics {
        self.lock.withLock { self.state.statistics }
    }

    package func close() throws(FanoutError) {
        let released = self.lock.withLock {
            self.state.isClosed = true
            return self.state.acknowledge(through: .max)
        }
        for continuation in released { continuation.resume() }
    }
}
