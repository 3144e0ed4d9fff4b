#if canImport(Glibc)
import Glibc
#endif

/// A position in a change log to wait on: every record before `lsn`, in `epoch` (a log that fails
/// and continues starts a new epoch, giving out LSNs again from its last acknowledged one).
@usableFromInline
package struct LogTicket: Sendable, Hashable {
    package var lsn: UInt64
    package var epoch: Int

    package init(lsn: UInt64, epoch: Int) {
        self.lsn = lsn
        self.epoch = epoch
    }
}

/// What a log has said of the records before a ticket.
package enum LogOutcome: Sendable, Hashable {
    /// Every record before the ticket is acknowledged.
    case acknowledged
    /// Some were refused (a failure of the log): what their callers are told, `UNAVAILABLE`.
    case refused(FanoutError)

    /// What `whenAcknowledged` tells: nil when acknowledged, else the refusal.
    var refusal: FanoutError? {
        switch self {
        case .acknowledged: nil
        case .refused(let refusal): refusal
        }
    }
}

/// Where the engine's changes go, in the order they were applied, and the one place that says when
/// they are durable. The engine appends under the lock that ordered the changes, waits (or lets its
/// caller wait) for the ticket, and hands out deliveries only behind acknowledged positions.
///
/// `WALWriter` is the log of a data directory; `InMemoryChangeLog` keeps records in memory (tests,
/// and the seam a replicated log stands in later). Implementations are thread-safe.
package protocol ChangeLog: AnyObject, Sendable {
    /// Throws why the log refuses records now (a failure, or closing); cheap while it accepts them.
    /// Checked before a change is applied, so that a change the log cannot take is not applied.
    func checkHealthy() throws(FanoutError)

    /// Queues `records` in order and returns the position after the last one, leaving the log's
    /// writer (if it has one) asleep until `startWriting()`. The engine queues under its project
    /// lock and wakes the writer once the lock is released: a writer woken under the lock can take
    /// the CPU from the thread holding it, and every other thread that wants the project then
    /// waits for both. `append` does both at once.
    func queue(_ records: [WALRecord]) throws(FanoutError) -> LogTicket

    /// Starts the writer on what `queue` left (cheap when it is awake, or nothing was queued).
    func startWriting()

    /// Queues records a replica already holds (a follower applying its shard's stream): as
    /// `append`, but a replicating log does not replicate them again.
    func appendReplicated(_ records: [WALRecord]) throws(FanoutError) -> LogTicket

    /// The position the next appended record gets. Read under every lock records are appended
    /// under, to get a consistent boundary.
    var nextRecordLSN: LogTicket { get }

    /// Every record before this position is acknowledged.
    var acknowledgedTicket: LogTicket { get }

    /// What the log has said of the records before `ticket`; nil while it has not said yet.
    func outcome(of ticket: LogTicket) -> LogOutcome?

    /// Calls `notify` once every record before `ticket` is acknowledged (with nil) or refused
    /// (with the refusal, `UNAVAILABLE`): at once on the calling thread when that is known now,
    /// else on the thread that acknowledges, with none of the log's locks held. `notify` must not
    /// block (an event loop's server hands it to its loop).
    func whenAcknowledged(_ ticket: LogTicket, _ notify: @escaping @Sendable (FanoutError?) -> Void)

    /// Blocks the calling thread until every record before `ticket` is acknowledged.
    func waitUntilAcknowledged(_ ticket: LogTicket) throws(FanoutError)

    /// What runs after each acknowledgement (given the new acknowledged position), and after a
    /// failure before any waiter is told (given the position through which records are kept).
    func setHandlers(acknowledged: @escaping @Sendable (LogTicket) -> Void, failed: @escaping @Sendable (UInt64) -> Void)

    /// Why the log refuses records now; nil while it accepts them.
    var currentFailure: FanoutError? { get }

    /// What the log has done since it opened.
    var currentStatistics: WALStatistics { get }

    /// Acknowledges what is queued, then refuses further records.
    func close() throws(FanoutError)
}

extension ChangeLog {
    /// Queues `records` in order and starts the writer on them; returns the position after the
    /// last one.
    package func append(_ records: [WALRecord]) throws(FanoutError) -> LogTicket {
        let ticket = try self.queue(records)
        self.startWriting()
        return ticket
    }

    /// A log that replicates nothing holds replicated records as any others.
    package func appendReplicated(_ records: [WALRecord]) throws(FanoutError) -> LogTicket {
        try self.append(records)
    }

    /// Blocks the calling thread until every record before `ticket` is acknowledged, at most
    /// `limit` (looking every 10 ms: for rare waits, such as a snapshot's on a replicated log).
    /// - Throws: `UNAVAILABLE` when they are not acknowledged in time, or the log failed.
    package func waitUntilAcknowledged(_ ticket: LogTicket, atMost limit: Duration) throws(FanoutError) {
        let deadline = ContinuousClock.now + limit
        while true {
            let acknowledged = self.acknowledgedTicket.lsn
            if acknowledged >= ticket.lsn { return }
            if let failure = self.currentFailure { throw failure }
            guard ContinuousClock.now < deadline else {
                throw FanoutError(.unavailable, "the log acknowledges through LSN \(acknowledged), not yet \(ticket.lsn)")
            }
            var pause = timespec(tv_sec: 0, tv_nsec: 10_000_000)
            nanosleep(&pause, nil)
        }
    }

    /// Suspends the calling task (blocking no thread) until every record before `ticket` is
    /// acknowledged. - Throws: `UNAVAILABLE` when the log refused them.
    func acknowledgement(of ticket: LogTicket) async throws(FanoutError) {
        let refusal = await withCheckedContinuation { (continuation: CheckedContinuation<FanoutError?, Never>) in
            self.whenAcknowledged(ticket) { continuation.resume(returning: $0) }
        }
        if let refusal { throw refusal }
    }
}
