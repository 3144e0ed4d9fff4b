import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The single writer of the write-ahead log: callers hand it records (cheap, under their own
/// locks, so the log order is the order changes were applied) and wait for their LSN to become
/// durable; one thread takes everything queued, writes it as one batch, and `fdatasync`s once for
/// all of them (group commit). Segments roll at `segmentSize`.
///
/// When a write or sync fails, every record not yet acknowledged is refused, the failure handler
/// (the engine, which rebuilds its state from what is durable) runs before any caller hears of it,
/// and the thread then tries every `retryInterval` to cut the failed segment back to its last
/// acknowledged batch and start a new one; once that works, the log accepts records again.
final class WALWriter: ChangeLog, @unchecked Sendable {
    // Safe to share: all mutable state below is guarded by `state`, and the file descriptor is
    // used only by the writer thread (and by `close` after that thread has stopped).

    static let segmentPrefix = "segment-"
    static let segmentSuffix = ".wal"

    let directory: String
    let durability: Durability
    let segmentSize: Int
    /// What the log should hold (`DIR/MANIFEST`), rewritten at each new segment.
    let manifest: WALManifestKeeper
    let logger: Logger
    /// Milliseconds the writer waits between attempts to continue after a failure.
    let retryInterval: Int

    private let state = ConditionLock()
    private var queue: [WALRecord] = []
    private var nextLSN: UInt64
    /// Every LSN below this is acknowledged (durable as `durability` defines).
    private var acknowledgedLSN: UInt64
    private var failure: FanoutError?
    private var closing = false
    /// False once `failure` or `closing` is set (both under `state`): lets `checkHealthy`, on every
    /// mutation's path, skip the mutex while the log is healthy.
    private let accepting = Atomic<Bool>(true)
    private var running = true
    private var rollRequested = false
    /// Rolls done (a caller of `roll` waits for it to move).
    private var rolls = 0
    /// Increased at each failure; `acknowledgedAtFailure[e]` is what epoch `e` acknowledged.
    private var epoch = 0
    private var acknowledgedAtFailure: [Int: UInt64] = [:]
    /// Runs on the writer thread after a failure, before any caller is told: given the LSN before
    /// which everything is acknowledged.
    private var failureHandler: (@Sendable (UInt64) -> Void)?
    /// Runs on the writer thread after each batch is acknowledged (outside the lock), given what is
    /// acknowledged now: the engine hands out the deliveries that waited for it.
    private var acknowledgementHandler: (@Sendable (LogTicket) -> Void)?
    /// True while a failure's handler runs: no caller is told an outcome until it is done.
    private var settling = false
    private var statistics = WALStatistics()
    /// Callers waiting for an LSN, each on its own condition variable, so that a batch wakes only
    /// the callers it acknowledges (a broadcast would wake all of them, on every batch).
    private var waiters: [(lsn: UInt64, condition: UnsafeMutablePointer<pthread_cond_t>)] = []
    /// Tasks suspended until an LSN is acknowledged (`acknowledgement(of:)`): no thread waits.
    private var suspendedWaiters: [(lsn: UInt64, continuation: CheckedContinuation<FanoutError?, Never>)] = []

    // Writer-thread state.
    private var descriptor: Int32 = -1
    private var segmentPath = ""
    private var segmentIndex: UInt64
    private var segmentBytes = 0
    /// The bytes of the current segment through its last acknowledged batch.
    private var acknowledgedBytes = 0
    private var thread = pthread_t()

    /// Starts a new segment `segmentIndex` whose first record will be `nextLSN`, and the writer
    /// thread. `manifest` lists the files already in the directory.
    init(
        directory: String,
        durability: Durability,
        segmentSize: Int,
        segmentIndex: UInt64,
        nextLSN: UInt64,
        manifest: WALManifest,
        retryInterval: Duration = .seconds(1),
        logger: Logger
    ) throws(FanoutError) {
        self.retryInterval = max(1, Int(retryInterval.components.seconds * 1000 + retryInterval.components.attoseconds / 1_000_000_000_000_000))
        self.directory = directory
        self.durability = durability
        self.segmentSize = segmentSize
        self.segmentIndex = segmentIndex
        self.nextLSN = nextLSN
        self.acknowledgedLSN = nextLSN
        self.manifest = WALManifestKeeper(directory: directory, manifest: manifest)
        self.logger = logger
        do {
            try self.startSegment(index: segmentIndex, firstLSN: nextLSN)
        } catch {
            throw FanoutError(.unavailable, "cannot start a WAL segment: \(error)")
        }
        let context = Unmanaged.passRetained(self).toOpaque()
        pthread_create(&self.thread, nil, { context in
            let writer = Unmanaged<WALWriter>.fromOpaque(context!).takeRetainedValue()
            writer.run()
            return nil
        }, context)
        pthread_detach(self.thread)
    }

    func setHandlers(acknowledged: @escaping @Sendable (LogTicket) -> Void, failed: @escaping @Sendable (UInt64) -> Void) {
        self.state.withLock {
            self.acknowledgementHandler = acknowledged
            self.failureHandler = failed
        }
    }

    /// The index in a segment file's name.
    static func index(ofSegmentName name: String) -> UInt64? {
        guard name.hasPrefix(Self.segmentPrefix), name.hasSuffix(Self.segmentSuffix) else { return nil }
        let digits = name.dropFirst(Self.segmentPrefix.count).dropLast(Self.segmentSuffix.count)
        guard digits.count == 16 else { return nil }
        return UInt64(digits, radix: 16)
    }

    static func segmentName(_ index: UInt64) -> String {
        let hex = String(index, radix: 16)
        return Self.segmentPrefix + String(repeating: "0", count: max(0, 16 - hex.count)) + hex + Self.segmentSuffix
    }

    /// The segment files among a directory's file names, oldest first (their fixed-width hex
    /// indexes sort as the names do).
    static func segmentNames(among names: [String]) -> [String] {
        names.filter { Self.index(ofSegmentName: $0) != nil }.sorted()
    }

    /// Queues `records` (in order) and returns the LSN after the last one; wait on it with
    /// `waitUntilAcknowledged`. Call while holding the lock that ordered the changes.
    func append(_ records: [WALRecord]) throws(FanoutError) -> LogTicket {
        self.state.lock()
        defer { self.state.unlock() }
        if let failure = self.failure { throw failure }
        guard !self.closing else { throw FanoutError(.unavailable, "the engine is closing") }
        self.queue.append(contentsOf: records)
        self.nextLSN += UInt64(records.count)
        self.state.signal(.work)
        return LogTicket(lsn: self.nextLSN, epoch: self.epoch)
    }

    /// Whether the records before `ticket` are acknowledged (`true`), refused by a failure
    /// (`false`), or neither yet (nil). Call with the lock held.
    private func outcome(of ticket: LogTicket) -> Bool? {
        if self.settling { return self.acknowledgedLSN >= ticket.lsn && ticket.epoch == self.epoch ? true : nil }
        if ticket.epoch != self.epoch {
            return ticket.lsn <= (self.acknowledgedAtFailure[ticket.epoch] ?? 0)
        }
        if self.acknowledgedLSN >= ticket.lsn { return true }
        return self.failure == nil ? nil : false
    }

    private var refusal: FanoutError {
        self.failure ?? FanoutError(.unavailable, "the write-ahead log failed before the change was durable")
    }

    /// The LSN the next appended record gets (and the epoch, to wait on it). Read it while holding
    /// every lock under which records are appended, to get a consistent boundary.
    var nextRecordLSN: LogTicket {
        self.state.withLock { LogTicket(lsn: self.nextLSN, epoch: self.epoch) }
    }

    /// Every record before this is acknowledged (in this epoch).
    var acknowledgedTicket: LogTicket {
        self.state.withLock { LogTicket(lsn: self.acknowledgedLSN, epoch: self.epoch) }
    }

    /// Why the log refuses records now (nil while it writes).
    var currentFailure: FanoutError? {
        self.state.withLock { self.failure }
    }

    /// Counters since the writer started.
    var currentStatistics: WALStatistics {
        self.state.withLock { self.statistics }
    }

    /// Ends the current segment and starts a new one, even with nothing queued (after a
    /// snapshot, so that the segments before it can go). Returns once the new segment exists.
    func roll() throws(FanoutError) {
        self.state.lock()
        defer { self.state.unlock() }
        if let failure = self.failure { throw failure }
        let target = self.rolls + 1
        self.rollRequested = true
        self.state.signal(.work)
        while self.rolls < target {
            if let failure = self.failure { throw failure }
            guard self.running, !self.closing else { throw FanoutError(.unavailable, "the engine is closing") }
            self.state.wait(.acknowledged)
        }
    }

    /// Throws the log's failure, if it has failed or is closing (checked before a change is applied,
    /// so that a change the log cannot take is not applied either).
    func checkHealthy() throws(FanoutError) {
        if self.accepting.load(ordering: .acquiring) { return }
        self.state.lock()
        defer { self.state.unlock() }
        if let failure = self.failure { throw failure }
        guard !self.closing else { throw FanoutError(.unavailable, "the engine is closing") }
    }

    /// Blocks until every record before `ticket` is acknowledged.
    func waitUntilAcknowledged(_ ticket: LogTicket) throws(FanoutError) {
        self.state.lock()
        defer { self.state.unlock() }
        if self.outcome(of: ticket) == nil {
            let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
            pthread_cond_init(condition, nil)
            defer {
                pthread_cond_destroy(condition)
                condition.deallocate()
            }
            self.waiters.append((ticket.lsn, condition))
            while self.outcome(of: ticket) == nil {
                self.state.wait(on: condition)
            }
            // The writer removes waiters it wakes; after a failure it removes all of them.
            self.waiters.removeAll { $0.condition == condition }
        }
        if self.outcome(of: ticket) == false { throw self.refusal }
    }

    /// Suspends the calling task (blocking no thread) until every record before `ticket` is acknowledged.
    func acknowledgement(of ticket: LogTicket) async throws(FanoutError) {
        // Already acknowledged (the older replies of a batch the server writes together): no
        // continuation, no suspension.
        self.state.lock()
        let known = self.outcome(of: ticket)
        let refusal = self.refusal
        self.state.unlock()
        switch known {
        case true?: return
        case false?: throw refusal
        case nil: break
        }
        let failure = await withCheckedContinuation { (continuation: CheckedContinuation<FanoutError?, Never>) in
            self.state.lock()
            switch self.outcome(of: ticket) {
            case true?:
                self.state.unlock()
                continuation.resume(returning: nil)
            case false?:
                let refusal = self.refusal
                self.state.unlock()
                continuation.resume(returning: refusal)
            case nil:
                self.suspendedWaiters.append((ticket.lsn, continuation))
                self.state.unlock()
            }
        }
        if let failure { throw failure }
    }

    /// Wakes the waiters whose LSN is acknowledged (all of them after a failure); call with the lock held.
    private func wakeWaiters() {
        self.waiters.removeAll { waiter in
            guard waiter.lsn <= self.acknowledgedLSN || self.failure != nil else { return false }
            pthread_cond_signal(waiter.condition)
            return true
        }
        // Resuming only schedules the task; it runs after the lock is released.
        self.suspendedWaiters.removeAll { waiter in
            if waiter.lsn <= self.acknowledgedLSN && !self.settling {
                waiter.continuation.resume(returning: nil)
                return true
            }
            if self.failure != nil && !self.settling {
                waiter.continuation.resume(returning: self.refusal)
                return true
            }
            return false
        }
    }

    /// Writes and syncs everything queued, stops the thread and closes the segment.
    func close() throws(FanoutError) {
        self.state.lock()
        self.closing = true
        self.accepting.store(false, ordering: .releasing)
        self.state.signal(.work)
        while self.running { self.state.wait(.acknowledged) }
        let failure = self.failure
        self.state.unlock()
        if self.descriptor >= 0 {
            _ = fdatasync(self.descriptor)
            Glibc.close(self.descriptor)
            self.descriptor = -1
        }
        if let failure { throw failure }
    }

    // MARK: - The writer thread

    private func run() {
        var lastSync = SystemWallClock().now()
        var unsynced = false
        while true {
            self.state.lock()
            while self.queue.isEmpty && !self.closing && !self.rollRequested {
                if case .interval(let milliseconds) = self.durability, unsynced {
                    self.state.wait(milliseconds: milliseconds)
                    break
                }
                self.state.wait(.work)
            }
            let records = self.queue
            self.queue.removeAll(keepingCapacity: true)
            let firstLSN = self.nextLSN - UInt64(records.count)
            let closing = self.closing
            let roll = self.rollRequested
            self.rollRequested = false
            self.state.unlock()

            do throws(FileIO.Error) {
                if roll {
                    try self.finishSegment()
                    try self.startSegment(index: self.segmentIndex + 1, firstLSN: firstLSN)
                    unsynced = false
                    self.state.withLock {
                        self.rolls += 1
                        self.state.broadcast(.acknowledged)
                    }
                }
                if !records.isEmpty {
                    let batch = WALFormat.batch(records, firstLSN: firstLSN)
                    if self.segmentBytes + batch.count > self.segmentSize && self.segmentBytes > WALFormat.segmentHeaderSize {
                        try self.finishSegment()
                        try self.startSegment(index: self.segmentIndex + 1, firstLSN: firstLSN)
                    }
                    try FileIO.writeAll(self.descriptor, batch, path: self.segmentPath)
                    self.segmentBytes += batch.count
                    unsynced = true
                    var synced = false
                    if self.durability == .always {
                        try FileIO.dataSync(self.descriptor, path: self.segmentPath)
                        unsynced = false
                        synced = true
                    }
                    self.acknowledgedBytes = self.segmentBytes
                    let (acknowledged, handler) = self.state.withLock {
                        self.acknowledgedLSN = firstLSN + UInt64(records.count)
                        self.statistics.records += records.count
                        self.statistics.batches += 1
                        self.statistics.bytes += batch.count
                        if synced { self.statistics.syncs += 1 }
                        self.wakeWaiters()
                        return (LogTicket(lsn: self.acknowledgedLSN, epoch: self.epoch), self.acknowledgementHandler)
                    }
                    handler?(acknowledged)
                }
                if case .interval(let milliseconds) = self.durability, unsynced {
                    let now = SystemWallClock().now()
                    if closing || now.millisecondsSinceEpoch - lastSync.millisecondsSinceEpoch >= Int64(milliseconds) {
                        try FileIO.dataSync(self.descriptor, path: self.segmentPath)
                        unsynced = false
                        lastSync = now
                        self.state.withLock { self.statistics.syncs += 1 }
                    }
                }
            } catch {
                guard self.recover(from: error) else { return }
                unsynced = false
                continue
            }
            if closing && records.isEmpty {
                self.state.withLock {
                    self.running = false
                    self.state.broadcast(.acknowledged)
                }
                return
            }
        }
    }

    /// After a failed write or sync: refuses every record not acknowledged, lets the failure
    /// handler rebuild the state from what is durable, tells the waiters, then tries every
    /// `retryInterval` to continue the log. Returns `true` once it can, `false` when closing.
    private func recover(from error: FileIO.Error) -> Bool {
        let failure = FanoutError(.unavailable, "the write-ahead log failed (\(error)); changes are refused until it can write again")
        self.state.lock()
        self.failure = failure
        self.settling = true
        self.accepting.store(false, ordering: .releasing)
        let handler = self.failureHandler
        let acknowledged = self.acknowledgedLSN
        self.state.unlock()
        self.logger.error(
            "the write-ahead log failed; changes are refused until it can write again",
            metadata: ["error": "\(error)", "acknowledged-lsn": "\(acknowledged)"]
        )
        handler?(acknowledged)
        self.state.withLock {
            // The refused records' LSNs are given out again once the log continues.
            self.acknowledgedAtFailure[self.epoch] = acknowledged
            self.epoch += 1
            self.queue.removeAll()
            self.nextLSN = acknowledged
            self.settling = false
            self.wakeWaiters()
            self.state.broadcast(.acknowledged)
        }
        while true {
            self.state.lock()
            if !self.closing { self.state.wait(milliseconds: self.retryInterval) }
            let closing = self.closing
            if closing {
                self.running = false
                self.state.broadcast(.acknowledged)
            }
            self.state.unlock()
            if closing { return false }
            do throws(FileIO.Error) {
                try self.reopen(at: acknowledged)
            } catch {
                continue
            }
            self.state.withLock {
                self.failure = nil
                self.accepting.store(true, ordering: .releasing)
            }
            self.logger.notice("the write-ahead log writes again", metadata: ["segment": "\(self.segmentPath)", "lsn": "\(acknowledged)"])
            return true
        }
    }

    /// Cuts the current segment back to its last acknowledged batch (what follows was refused; it
    /// is kept in `quarantine/` first, as every cut is) and starts a new segment at `lsn`.
    private func reopen(at lsn: UInt64) throws(FileIO.Error) {
        if self.descriptor >= 0 {
            let name = Self.segmentName(self.segmentIndex)
            if let kept = try Quarantine.cut(name, at: self.acknowledgedBytes, in: self.directory) {
                self.logger.warning(
                    "cut the refused end of the WAL segment (never acknowledged)",
                    metadata: ["segment": "\(name)", "offset": "\(self.acknowledgedBytes)", "kept-in": "\(kept)"]
                )
            }
            self.segmentBytes = self.acknowledgedBytes
            try self.finishSegment()
        }
        try self.startSegment(index: self.segmentIndex + 1, firstLSN: lsn)
    }

    /// Creates segment `index`: header written to a temporary name, synced, renamed, directory
    /// synced; then the manifest records it (closing the previous segment there).
    private func startSegment(index: UInt64, firstLSN: UInt64) throws(FileIO.Error) {
        let path = "\(self.directory)/\(Self.segmentName(index))"
        let temporary = path + ".tmp"
        let descriptor = try FileIO.open(temporary, O_WRONLY | O_CREAT | O_TRUNC)
        do throws(FileIO.Error) {
            try FileIO.writeAll(descriptor, WALFormat.segmentHeader(index: index, firstLSN: firstLSN), path: temporary)
            try FileIO.dataSync(descriptor, path: temporary)
            try FileIO.rename(temporary, path)
            try FileIO.syncDirectory(self.directory)
            let previous = self.segmentPath.isEmpty ? nil : WALManifest.Segment.End(lsn: firstLSN, bytes: self.segmentBytes)
            try self.manifest.segmentStarted(index: index, firstLSN: firstLSN, closingAt: previous)
        } catch {
            Glibc.close(descriptor)
            _ = unlink(temporary)
            throw error
        }
        self.descriptor = descriptor
        self.segmentPath = path
        self.segmentIndex = index
        self.segmentBytes = WALFormat.segmentHeaderSize
        self.acknowledgedBytes = WALFormat.segmentHeaderSize
    }

    private func finishSegment() throws(FileIO.Error) {
        guard self.descriptor >= 0 else { return }
        try FileIO.dataSync(self.descriptor, path: self.segmentPath)
        Glibc.close(self.descriptor)
        self.descriptor = -1
    }
}
