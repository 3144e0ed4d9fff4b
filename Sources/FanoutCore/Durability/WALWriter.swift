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
    // Safe to share: what callers and the writer thread share is `shared` (a `ConditionLocked`
    // state, touched only with its lock held) and `accepting` (atomic); the mutable fields below
    // `shared` belong to the writer thread alone (and to `init` before it starts, and `close`
    // after it has stopped).

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
    let metrics: LogMetrics?

    private let shared: ConditionLocked<WALWriterState>
    /// False once the log fails or closes: lets `checkHealthy`, on every mutation's path, skip the
    /// lock while the log is healthy. Written under `shared`'s lock.
    private let accepting = Atomic<Bool>(true)

    // Writer-thread state.
    private var descriptor: Int32 = -1
    private var segmentPath = ""
    private var segmentIndex: UInt64
    private var segmentBytes = 0
    /// The current segment's size on disk: `segmentBytes` and the zeros written ahead of them.
    private var filledBytes = 0
    /// False once the disk had no room for the zeros ahead, until the next segment; always false
    /// with durability `none`, which never syncs.
    private var fillsAhead = true
    /// The bytes of the current segment through its last acknowledged batch.
    private var acknowledgedBytes = 0
    /// Frames each batch in buffers kept between batches.
    private var batchEncoder = WALFormat.BatchEncoder()
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
        metrics: LogMetrics? = nil,
        logger: Logger
    ) throws(FanoutError) {
        self.metrics = metrics
        self.retryInterval = max(1, Int(retryInterval.components.seconds * 1000 + retryInterval.components.attoseconds / 1_000_000_000_000_000))
        self.directory = directory
        self.durability = durability
        self.segmentSize = segmentSize
        self.segmentIndex = segmentIndex
        self.shared = ConditionLocked(WALWriterState(nextLSN: nextLSN))
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
        self.shared.withLock { state in
            state.acknowledgementHandler = acknowledged
            state.failureHandler = failed
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
    /// `waitUntilAcknowledged`. Call while holding the lock that ordered the changes, and
    /// `startWriting()` once it is released.
    func queue(_ records: [WALRecord]) throws(FanoutError) -> LogTicket {
        try self.shared.withLock { (state: inout WALWriterState) throws(FanoutError) -> LogTicket in
            try state.append(records)
        }
    }

    /// Wakes the writer if it waits for work. Outside the writer's lock: the records were queued
    /// under it, so the writer either saw them before it waited or is waiting now, and the signal
    /// reaches it; a writer that is busy finds them when it looks again.
    func startWriting() {
        self.shared.signal(.work)
    }

    /// The LSN the next appended record gets (and the epoch, to wait on it). Read it while holding
    /// every lock under which records are appended, to get a consistent boundary.
    var nextRecordLSN: LogTicket {
        self.shared.withLock { $0.nextTicket }
    }

    /// Every record before this is acknowledged (in this epoch).
    var acknowledgedTicket: LogTicket {
        self.shared.withLock { $0.acknowledgedTicket }
    }

    /// Why the log refuses records now (nil while it writes).
    var currentFailure: FanoutError? {
        self.shared.withLock { $0.failure }
    }

    /// Counters since the writer started.
    var currentStatistics: WALStatistics {
        self.shared.withLock { $0.statistics }
    }

    /// Ends the current segment and starts a new one, even with nothing queued (after a
    /// snapshot, so that the segments before it can go). Returns once the new segment exists.
    func roll() throws(FanoutError) {
        let target = try self.shared.withLock { (state: inout WALWriterState) throws(FanoutError) -> Int in
            if let failure = state.failure { throw failure }
            self.shared.signal(.work)
            return state.requestRoll()
        }
        try self.shared.withLock(waitingOn: .acknowledged) { state in
            state.rolls >= target || state.failure != nil || !state.running || state.closing
        } _: { (state: inout WALWriterState) throws(FanoutError) in
            if state.rolls >= target { return }
            if let failure = state.failure { throw failure }
            throw FanoutError(.unavailable, "the engine is closing")
        }
    }

    /// Throws the log's failure, if it has failed or is closing (checked before a change is applied,
    /// so that a change the log cannot take is not applied either).
    func checkHealthy() throws(FanoutError) {
        if self.accepting.load(ordering: .acquiring) { return }
        if let refusal = self.shared.withLock({ $0.refusalNow }) { throw refusal }
    }

    /// Blocks until every record before `ticket` is acknowledged.
    func waitUntilAcknowledged(_ ticket: LogTicket) throws(FanoutError) {
        let known = self.shared.withLock { $0.outcome(of: ticket) }
        let outcome: Bool
        if let known {
            outcome = known
        } else {
            let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
            pthread_cond_init(condition, nil)
            defer {
                pthread_cond_destroy(condition)
                condition.deallocate()
            }
            self.shared.withLock { $0.addWaiter((ticket.lsn, WALWriterState.WaitCondition(pointer: condition))) }
            // The writer removes the waiters it wakes; a waiter that finds its outcome first
            // removes itself, with the lock held, before its condition variable goes.
            outcome = self.shared.withLock(waitingOn: condition) { $0.outcome(of: ticket) != nil } _: { state in
                state.removeWaiter(WALWriterState.WaitCondition(pointer: condition))
                return state.outcome(of: ticket)!
            }
        }
        if !outcome { throw self.shared.withLock { $0.refusal } }
    }

    func outcome(of ticket: LogTicket) -> LogOutcome? {
        self.shared.withLock { $0.logOutcome(of: ticket) }
    }

    /// Tells `notify` once every record before `ticket` is acknowledged (nil) or refused.
    func whenAcknowledged(_ ticket: LogTicket, _ notify: @escaping @Sendable (FanoutError?) -> Void) {
        // Known now (the older replies of a batch a server writes together): told at once, outside the lock.
        let now = self.shared.withLock { state in
            let outcome = state.logOutcome(of: ticket)
            if outcome == nil { state.addWaiter((ticket.lsn, notify)) }
            return outcome
        }
        if let now { notify(now.refusal) }
    }

    /// Writes and syncs everything queued, stops the thread and closes the segment.
    func close() throws(FanoutError) {
        self.shared.withLock { state in
            state.startClosing()
            self.accepting.store(false, ordering: .releasing)
            self.shared.signal(.work)
        }
        let failure = self.shared.withLock(waitingOn: .acknowledged) { !$0.running } _: { $0.failure }
        // A healthy log's segment is finished (its zeros ahead cut, synced, closed). A failed log's
        // is closed as it is (cutting it is start-up's to do), as is one whose finish failed.
        if failure == nil {
            try? self.finishSegment()
        }
        if self.descriptor >= 0 {
            _ = fdatasync(self.descriptor)
            Glibc.close(self.descriptor)
            self.descriptor = -1
        }
        if let failure { throw failure }
        self.discardEmptySegment()
    }

    /// A segment that received no record goes with the close, so that opening and closing a
    /// directory (an offline command, a read-only look) leaves no empty segment behind. The
    /// manifest forgets it first: a crash before the file is gone leaves an unlisted, empty newest
    /// segment, which recovery reads as a segment with nothing in it.
    private func discardEmptySegment() {
        guard self.segmentBytes == WALFormat.segmentHeaderSize,
            (try? self.manifest.segmentDiscarded(index: self.segmentIndex)) == true
        else { return }
        _ = unlink(self.segmentPath)
        try? FileIO.syncDirectory(self.directory)
    }

    // MARK: - The writer thread

    /// `fdatasync`s the segment, timed, and counts the records it made durable.
    private func sync(records: Int) throws(FileIO.Error) {
        let started = ContinuousClock.now
        try FileIO.dataSync(self.descriptor, path: self.segmentPath)
        self.metrics?.synced(records: records, duration: ContinuousClock.now - started)
    }

    private func run() {
        var lastSync = SystemWallClock().now()
        var unsynced = false
        // Records written since the last sync (for the records-per-sync histogram).
        var unsyncedRecords = 0
        while true {
            // With an interval durability and unsynced bytes, wait at most the interval.
            var interval: Int? = nil
            if case .interval(let milliseconds) = self.durability, unsynced { interval = milliseconds }
            let work = self.shared.withLock(waitingForWorkAtMost: interval) { $0.hasWork } _: { $0.takeWork() }

            do throws(FileIO.Error) {
                if work.roll {
                    try self.finishSegment()
                    try self.startSegment(index: self.segmentIndex + 1, firstLSN: work.firstLSN)
                    unsynced = false
                    self.shared.withLock { state in
                        state.rolled()
                        self.shared.broadcast(.acknowledged)
                    }
                }
                if work.count > 0 {
                    let batch = self.batchEncoder.batch(appends: work.appends, firstLSN: work.firstLSN)
                    if self.segmentBytes + batch.count > self.segmentSize && self.segmentBytes > WALFormat.segmentHeaderSize {
                        try self.finishSegment()
                        try self.startSegment(index: self.segmentIndex + 1, firstLSN: work.firstLSN)
                    }
                    try self.append(batch)
                    self.metrics?.wrote(records: work.count, bytes: batch.count)
                    unsynced = true
                    unsyncedRecords += work.count
                    var synced = false
                    if self.durability == .always {
                        try self.sync(records: unsyncedRecords)
                        unsynced = false
                        unsyncedRecords = 0
                        synced = true
                    }
                    self.acknowledgedBytes = self.segmentBytes
                    let end = work.firstLSN + UInt64(work.count)
                    let (acknowledged, handler, wakeups) = self.shared.withLock { state in
                        let wakeups = state.acknowledge(through: end, count: work.count, bytes: batch.count, synced: synced)
                        wakeups.signalBlocked()
                        return (state.acknowledgedTicket, state.acknowledgementHandler, wakeups)
                    }
                    // Deliveries waiting for this batch go out before the callers hear back.
                    handler?(acknowledged)
                    wakeups.notify()
                }
                if case .interval(let milliseconds) = self.durability, unsynced {
                    let now = SystemWallClock().now()
                    if work.closing || now.millisecondsSinceEpoch - lastSync.millisecondsSinceEpoch >= Int64(milliseconds) {
                        try self.sync(records: unsyncedRecords)
                        unsynced = false
                        unsyncedRecords = 0
                        lastSync = now
                        self.shared.withLock { $0.synced() }
                    }
                }
            } catch {
                self.metrics?.failed()
                guard self.recover(from: error) else { return }
                unsynced = false
                unsyncedRecords = 0
                continue
            }
            if work.closing && work.count == 0 {
                self.shared.withLock { state in
                    state.stopped()
                    self.shared.broadcast(.acknowledged)
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
        let (acknowledged, handler) = self.shared.withLock { state in
            self.accepting.store(false, ordering: .releasing)
            return (state.fail(failure), state.failureHandler)
        }
        self.logger.error(
            "the write-ahead log failed; changes are refused until it can write again",
            metadata: ["error": "\(error)", "acknowledged-lsn": "\(acknowledged)"]
        )
        handler?(acknowledged)
        let wakeups = self.shared.withLock { state in
            let wakeups = state.settle()
            wakeups.signalBlocked()
            self.shared.broadcast(.acknowledged)
            return wakeups
        }
        wakeups.notify()
        while true {
            // Waits the retry interval unless closing (a close signals `.work`).
            let closing = self.shared.withLock(waitingForWorkAtMost: self.retryInterval) { $0.closing } _: { state in
                if state.closing {
                    state.stopped()
                    self.shared.broadcast(.acknowledged)
                }
                return state.closing
            }
            if closing { return false }
            do throws(FileIO.Error) {
                try self.reopen(at: acknowledged)
            } catch {
                continue
            }
            self.shared.withLock { state in
                state.recovered()
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

    /// Writes `batch` after the segment's last, first filling the file with zeros up to the next
    /// multiple of `WALFormat.fillStep` when the batch reaches past them: a batch then overwrites bytes the
    /// file already has, so the `fdatasync` after it need not write the file's size (ext4 writes
    /// the inode for that each time; a segment grows once per step instead).
    private func append(_ batch: [UInt8]) throws(FileIO.Error) {
        let end = self.segmentBytes + batch.count
        if end > self.filledBytes && self.fillsAhead {
            try self.fillAhead(past: end)
        }
        try FileIO.writeAll(self.descriptor, batch, at: self.segmentBytes, path: self.segmentPath)
        self.segmentBytes = end
        self.filledBytes = max(self.filledBytes, end)
    }

    /// Writes zeros after `end`, up to the next multiple of `WALFormat.fillStep` (at most the segment size).
    /// A disk without room for them stops the filling for this segment (what was written of them
    /// is cut again): its batches then grow the file as they come, as long as there is room.
    private func fillAhead(past end: Int) throws(FileIO.Error) {
        let step = (end + WALFormat.fillStep - 1) / WALFormat.fillStep * WALFormat.fillStep
        let target = max(end, min(step, self.segmentSize))
        do throws(FileIO.Error) {
            try FileIO.writeZeros(self.descriptor, end..<target, path: self.segmentPath)
            self.filledBytes = target
        } catch {
            self.fillsAhead = false
            try FileIO.truncate(self.descriptor, to: self.filledBytes, path: self.segmentPath)
        }
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
        self.filledBytes = WALFormat.segmentHeaderSize
        self.fillsAhead = self.durability != .none
        self.acknowledgedBytes = WALFormat.segmentHeaderSize
    }

    /// Cuts the zeros written ahead of the last batch and syncs the segment.
    private func finishSegment() throws(FileIO.Error) {
        guard self.descriptor >= 0 else { return }
        if self.filledBytes > self.segmentBytes {
            try FileIO.truncate(self.descriptor, to: self.segmentBytes, path: self.segmentPath)
            self.filledBytes = self.segmentBytes
        }
        try FileIO.dataSync(self.descriptor, path: self.segmentPath)
        Glibc.close(self.descriptor)
        self.descriptor = -1
    }
}
