import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The single writer of the write-ahead log: callers hand it records (cheap, under their own
/// locks, so the log order is the order changes were applied) and wait for their LSN to become
/// durable; one thread takes everything queued, writes it as one batch, and `fdatasync`s once for
/// all of them (group commit). Segments roll at `segmentSize`.
final class WALWriter: @unchecked Sendable {
    // Safe to share: all mutable state below is guarded by `state`, and the file descriptor is
    // used only by the writer thread (and by `close` after that thread has stopped).

    static let segmentPrefix = "segment-"
    static let segmentSuffix = ".wal"

    let directory: String
    let durability: Durability
    let segmentSize: Int

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
    private var thread = pthread_t()

    /// Starts a new segment `segmentIndex` whose first record will be `nextLSN`, and the writer thread.
    init(directory: String, durability: Durability, segmentSize: Int, segmentIndex: UInt64, nextLSN: UInt64) throws(FanoutError) {
        self.directory = directory
        self.durability = durability
        self.segmentSize = segmentSize
        self.segmentIndex = segmentIndex
        self.nextLSN = nextLSN
        self.acknowledgedLSN = nextLSN
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

    static func segmentName(_ index: UInt64) -> String {
        let hex = String(index, radix: 16)
        return Self.segmentPrefix + String(repeating: "0", count: max(0, 16 - hex.count)) + hex + Self.segmentSuffix
    }

    /// The segment files among a directory's file names, oldest first (their fixed-width hex
    /// indexes sort as the names do).
    static func segmentNames(among names: [String]) -> [String] {
        names.filter { $0.hasPrefix(Self.segmentPrefix) && $0.hasSuffix(Self.segmentSuffix) }.sorted()
    }

    /// Queues `records` (in order) and returns the LSN after the last one; wait on it with
    /// `waitUntilAcknowledged`. Call while holding the lock that ordered the changes.
    func append(_ records: [WALRecord]) throws(FanoutError) -> UInt64 {
        self.state.lock()
        defer { self.state.unlock() }
        if let failure = self.failure { throw failure }
        guard !self.closing else { throw FanoutError(.unavailable, "the engine is closing") }
        self.queue.append(contentsOf: records)
        self.nextLSN += UInt64(records.count)
        self.state.signal(.work)
        return self.nextLSN
    }

    /// The LSN the next appended record gets. Read it while holding every lock under which records
    /// are appended, to get a consistent boundary.
    var nextRecordLSN: UInt64 {
        self.state.withLock { self.nextLSN }
    }

    /// Counters since the writer started.
    var currentStatistics: WALStatistics {
        self.state.withLock { self.statistics }
    }

    /// Makes the next batch start a new segment (after a snapshot, so older segments can go).
    func requestRoll() {
        self.state.withLock { self.rollRequested = true }
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

    /// Blocks until every record before `lsn` is acknowledged.
    func waitUntilAcknowledged(_ lsn: UInt64) throws(FanoutError) {
        self.state.lock()
        defer { self.state.unlock() }
        if self.acknowledgedLSN < lsn && self.failure == nil {
            let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
            pthread_cond_init(condition, nil)
            defer {
                pthread_cond_destroy(condition)
                condition.deallocate()
            }
            self.waiters.append((lsn, condition))
            while self.acknowledgedLSN < lsn && self.failure == nil {
                self.state.wait(on: condition)
            }
            // The writer removes waiters it wakes; after a failure it removes all of them.
            self.waiters.removeAll { $0.condition == condition }
        }
        if self.acknowledgedLSN < lsn, let failure = self.failure { throw failure }
    }

    /// Suspends the calling task (blocking no thread) until every record before `lsn` is acknowledged.
    func acknowledgement(of lsn: UInt64) async throws(FanoutError) {
        // Already acknowledged (the older replies of a batch the server writes together): no
        // continuation, no suspension.
        self.state.lock()
        let acknowledged = self.acknowledgedLSN >= lsn
        self.state.unlock()
        if acknowledged { return }
        let failure = await withCheckedContinuation { (continuation: CheckedContinuation<FanoutError?, Never>) in
            self.state.lock()
            if self.acknowledgedLSN >= lsn {
                self.state.unlock()
                continuation.resume(returning: nil)
            } else if let failure = self.failure {
                self.state.unlock()
                continuation.resume(returning: failure)
            } else {
                self.suspendedWaiters.append((lsn, continuation))
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
            if waiter.lsn <= self.acknowledgedLSN {
                waiter.continuation.resume(returning: nil)
                return true
            }
            if let failure = self.failure {
                waiter.continuation.resume(returning: failure)
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
            while self.queue.isEmpty && !self.closing {
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
            let roll = self.rollRequested && !records.isEmpty
            if roll { self.rollRequested = false }
            self.state.unlock()

            do throws(FileIO.Error) {
                if !records.isEmpty {
                    let batch = WALFormat.batch(records, firstLSN: firstLSN)
                    if roll || (self.segmentBytes + batch.count > self.segmentSize && self.segmentBytes > WALFormat.segmentHeaderSize) {
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
                    self.state.withLock {
                        self.acknowledgedLSN = firstLSN + UInt64(records.count)
                        self.statistics.records += records.count
                        self.statistics.batches += 1
                        self.statistics.bytes += batch.count
                        if synced { self.statistics.syncs += 1 }
                        self.wakeWaiters()
                    }
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
                self.state.withLock {
                    self.failure = FanoutError(.unavailable, "the write-ahead log failed: \(error)")
                    self.accepting.store(false, ordering: .releasing)
                    self.running = false
                    self.wakeWaiters()
                    self.state.broadcast(.acknowledged)
                }
                return
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

    /// Creates segment `index`: header written to a temporary name, synced, renamed, directory synced.
    private func startSegment(index: UInt64, firstLSN: UInt64) throws(FileIO.Error) {
        let path = "\(self.directory)/\(Self.segmentName(index))"
        let temporary = path + ".tmp"
        let descriptor = try FileIO.open(temporary, O_WRONLY | O_CREAT | O_TRUNC)
        do throws(FileIO.Error) {
            try FileIO.writeAll(descriptor, WALFormat.segmentHeader(index: index, firstLSN: firstLSN), path: temporary)
            try FileIO.dataSync(descriptor, path: temporary)
            try FileIO.rename(temporary, path)
            try FileIO.syncDirectory(self.directory)
        } catch {
            Glibc.close(descriptor)
            throw error
        }
        self.descriptor = descriptor
        self.segmentPath = path
        self.segmentIndex = index
        self.segmentBytes = WALFormat.segmentHeaderSize
    }

    private func finishSegment() throws(FileIO.Error) {
        try FileIO.dataSync(self.descriptor, path: self.segmentPath)
        Glibc.close(self.descriptor)
        self.descriptor = -1
    }
}
