public import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

extension Engine {
    /// The default size at which the log starts a new segment.
    public static let defaultSegmentSize = 64 << 20

    /// Opens (or creates) a data directory: takes its lock, checks the whole log against its
    /// manifest, replays the newest readable snapshot and the log after it, cuts a torn tail of the
    /// newest segment (keeping the cut bytes in `quarantine/`), and starts logging to a new segment.
    ///
    /// - Throws: `UNAVAILABLE` when the directory is locked by another process or cannot be read or
    ///   written; `INTERNAL` when the log is damaged anywhere but a torn tail (corruption, a missing
    ///   or shortened segment, a damaged header, a missing snapshot no older one makes up for): the
    ///   error names each file, byte offset and LSN, and `fanout wal repair` mends the directory.
    ///
    /// When a write or sync of the log fails (a full disk, an I/O error), the change is refused
    /// with `UNAVAILABLE`, the state is rebuilt from what is durable before the caller hears of it
    /// (no read shows a refused change), the failure is logged at error level, and the engine
    /// tries every `logRetryInterval` to continue the log; once it can, changes are accepted again.
    public convenience init(
        directory: String,
        durability: Durability = .always,
        segmentSize: Int = Engine.defaultSegmentSize,
        configuration: EngineConfiguration = EngineConfiguration(),
        clock: any WallClock = SystemWallClock(),
        logRetryInterval: Duration = .seconds(1),
        metrics: EngineMetrics = EngineMetrics(),
        logger: Logger = Logger(label: "fanout")
    ) throws(FanoutError) {
        try self.init(
            directory: directory, durability: durability, segmentSize: segmentSize, configuration: configuration, clock: clock,
            logRetryInterval: logRetryInterval, metrics: metrics, logger: logger, replication: nil
        )
    }

    /// Where a shard owner's engine replicates its log (issue 22, docs/scale-out.md).
    package struct Replication: Sendable {
        /// The LSN after the last record the replica holds of this directory's log (0: none).
        package var replicatedThrough: UInt64
        /// The wait before a batch is offered again after `UNAVAILABLE`.
        package var retryInterval: Duration
        /// How long closing waits for the replica to hold everything.
        package var closeWait: Duration
        /// Hands a run of records, durable in the local log, to the replica (`ReplicatedChangeLog`).
        package var replicate: ReplicatedChangeLog.Replicate

        package init(
            replicatedThrough: UInt64,
            retryInterval: Duration = .milliseconds(200),
            closeWait: Duration = .seconds(5),
            replicate: @escaping ReplicatedChangeLog.Replicate
        ) {
            self.replicatedThrough = replicatedThrough
            self.retryInterval = retryInterval
            self.closeWait = closeWait
            self.replicate = replicate
        }
    }

    /// A check of a data directory's log at start (issue 22): its records from `from` to its end
    /// go to `body`, which throws to refuse the start (a shard node's log must be its stream's).
    package struct LogCheck: Sendable {
        package var from: UInt64
        package var body: @Sendable ([WALRecord]) throws(FanoutError) -> Void

        package init(from: UInt64, _ body: @escaping @Sendable ([WALRecord]) throws(FanoutError) -> Void) {
            self.from = from
            self.body = body
        }
    }

    /// Opens a data directory as `init(directory:...)` does and, with `replication`, logs through a
    /// `ReplicatedChangeLog` over its write-ahead log: a change is acknowledged once the replica
    /// holds it too. The records the log holds past `replication.replicatedThrough` (synced, then a
    /// crash before they were published) are replicated first, before anything is acknowledged.
    ///
    /// With `check`, the log's records from `check.from` on are checked before anything else.
    ///
    /// - Throws: besides `init(directory:...)`'s errors, `FAILED_PRECONDITION` when the replica
    ///   holds more of this log than the directory does (the directory is not the one the replica
    ///   was fed from, or lost its end), or when records it must replicate or check are no longer in
    ///   the log (a snapshot replaced them); what `check` throws.
    package convenience init(
        directory: String,
        durability: Durability = .always,
        segmentSize: Int = Engine.defaultSegmentSize,
        configuration: EngineConfiguration = EngineConfiguration(),
        clock: any WallClock = SystemWallClock(),
        logRetryInterval: Duration = .seconds(1),
        metrics: EngineMetrics = EngineMetrics(),
        logger: Logger = Logger(label: "fanout"),
        check: LogCheck? = nil,
        replication: Replication?
    ) throws(FanoutError) {
        let started = ContinuousClock.now
        let lock: Int32
        do {
            try FileIO.makeDirectory(directory)
            lock = try FileIO.lockExclusively("\(directory)/LOCK")
        } catch {
            throw FanoutError(.unavailable, "cannot lock the data directory (is another fanout using it?): \(error)")
        }
        do throws(FanoutError) {
            let needed = [check?.from, replication?.replicatedThrough].compactMap { $0 }.min()
            var replay = try Self.replayLog(in: directory, configuration: configuration, logger: logger, collectingFrom: needed)
            if let check, let needed {
                try check.body(Array(replay.collected.dropFirst(Int(min(check.from, replay.report.nextLSN) - needed))))
            }
            if let replication, let needed {
                guard replication.replicatedThrough <= replay.report.nextLSN else {
                    throw FanoutError(
                        .failedPrecondition,
                        "the replica holds this log through LSN \(replication.replicatedThrough), past its end in \(directory) (LSN \(replay.report.nextLSN)): this directory is not the one the replica was fed from, or it lost its end"
                    )
                }
                replay.collected.removeFirst(Int(replication.replicatedThrough - needed))
            }
            // Delivery counters count what happens from now on; replay rebuilt the state, not events.
            for id in replay.projects.keys {
                replay.projects[id]!.deliveries.counters = DeliveryStatistics()
            }
            let wal = try WALWriter(
                directory: directory,
                durability: durability,
                segmentSize: segmentSize,
                segmentIndex: replay.nextSegmentIndex,
                nextLSN: replay.report.nextLSN,
                manifest: replay.manifest,
                retryInterval: logRetryInterval,
                metrics: metrics.log,
                logger: logger
            )
            replay.report.duration = ContinuousClock.now - started
            metrics.recordRecovery(duration: replay.report.duration)
            let log: any ChangeLog = replication.map { replication in
                ReplicatedChangeLog(
                    local: wal, unreplicated: replay.collected, retryInterval: replication.retryInterval, closeWait: replication.closeWait,
                    replicate: replication.replicate
                )
            } ?? wal
            self.init(
                configuration: configuration,
                clock: clock,
                projects: replay.projects,
                log: log,
                wal: wal,
                directory: directory,
                directoryLock: lock,
                recovery: replay.report,
                metrics: metrics,
                logger: logger
            )
        } catch {
            Glibc.close(lock)
            throw error
        }
    }

    struct Replay {
        var projects: [ProjectID: ProjectState]
        var report: RecoveryReport
        var nextSegmentIndex: UInt64
        /// The manifest of the files kept, every segment closed (the writer adds the new one).
        var manifest: WALManifest
        /// The records from the LSN `replayLog` was asked to collect from, in order.
        var collected: [WALRecord] = []
    }

    /// Loads the newest readable snapshot of `directory`, then replays the log from its LSN.
    ///
    /// At start-up (`through` nil) the directory is mended where that loses nothing (half-written
    /// `.tmp` files deleted, a torn tail cut, damaged snapshots moved to `quarantine/`) and refused
    /// otherwise. With `through`, after a log failure, the state is rebuilt from the records before
    /// that LSN only, and nothing on disk is changed. With `collectFrom`, the records from that LSN
    /// on are returned too (`Replay.collected`); they must be in the log, not only in the snapshot.
    static func replayLog(
        in directory: String,
        configuration: EngineConfiguration,
        logger: Logger,
        through limit: UInt64? = nil,
        collectingFrom collectFrom: UInt64? = nil
    ) throws(FanoutError) -> Replay {
        var report = RecoveryReport(segments: 0, records: 0, nextLSN: 0, truncatedTail: nil, duration: .zero)
        if limit == nil {
            // Half-written segments, snapshots and manifests (a crash before the rename) hold
            // nothing acknowledged.
            let names: [String]
            do {
                names = try FileIO.list(directory)
            } catch {
                throw FanoutError(.unavailable, "cannot read the data directory: \(error)")
            }
            for name in names where name.hasSuffix(".tmp") {
                _ = unlink("\(directory)/\(name)")
            }
        }
        // Segments the newest snapshot covers are not read unless that snapshot turns out damaged.
        var scan = try WALScan.examine(directory, decodeRecords: false, checkSnapshots: false, skippingCoveredSegments: true)

        // The base: the snapshot (or the empty state) from which the log reaches furthest. A
        // snapshot that turns out damaged while it loads is marked, and the plan made again.
        var projects: [ProjectID: ProjectState] = [:]
        var plan: WALPlan
        while true {
            plan = scan.plan()
            if let limit {
                guard plan.endLSN >= limit else {
                    throw FanoutError(.internal, "the log in \(directory) no longer holds every acknowledged record (it reaches LSN \(plan.endLSN), \(limit) were acknowledged)")
                }
            } else if !scan.allowsStart {
                throw Self.refusal(scan, plan: plan, directory: directory)
            }
            projects = [.default: ProjectState(id: .default, configuration: configuration)]
            guard let name = plan.snapshot else { break }
            let path = "\(directory)/\(name)"
            do {
                let (_, count) = try Snapshot.read(path) { record in
                    try Self.apply(record, to: &projects, configuration: configuration)
                }
                report.snapshot = (path, plan.baseLSN, count)
                break
            } catch {
                report.skippedSnapshots.append("\(path): \(error)")
                if scan.segments.contains(where: \.isSkipped) {
                    // An older base is needed: read the segments skipped so far.
                    let damaged = scan.snapshots.filter { $0.damage != nil }
                    scan = try WALScan.examine(directory, decodeRecords: false, checkSnapshots: false)
                    for snapshot in damaged { scan.markDamaged(snapshot: snapshot.name, snapshot.damage!) }
                }
                scan.markDamaged(snapshot: name, "\(error)")
            }
        }

        if limit == nil {
            do {
                for name in plan.droppedSnapshots {
                    let kept = try Quarantine.move(name, in: directory)
                    logger.warning("a damaged snapshot was moved aside; an older base holds everything it did", metadata: ["file": "\(name)", "moved-to": "\(kept)"])
                }
                if let cut = plan.cut {
                    let kept = try Quarantine.cut(cut.segment, at: cut.offset, in: directory)
                    let problem = scan.problems.first { $0.kind == .tornTail }
                    report.truncatedTail = ("\(directory)/\(cut.segment)", cut.offset, problem?.detail ?? "a torn tail")
                    logger.warning(
                        "cut the torn tail of the newest WAL segment (an interrupted write, never acknowledged)",
                        metadata: ["segment": "\(cut.segment)", "offset": "\(cut.offset)", "lsn": "\(cut.lsn)", "kept-in": "\(kept ?? "nothing followed")"]
                    )
                }
            } catch {
                throw FanoutError(.unavailable, "cannot set aside the damaged part of the log: \(error)")
            }
        }

        report.nextLSN = plan.baseLSN
        let end = limit ?? plan.endLSN
        if let collectFrom, collectFrom < plan.baseLSN {
            throw FanoutError(
                .failedPrecondition,
                "the log in \(directory) no longer holds the records from LSN \(collectFrom) (the snapshot at LSN \(plan.baseLSN) replaced them), and the replica lacks them"
            )
        }
        var collected: [WALRecord] = []
        let segments = plan.segments
        // Segments are read and decoded on a thread of their own, a few thousand records ahead of
        // the thread applying them: it starts on a segment's first batches, not once it is all read.
        let reader = ProducerThread<ReplayPiece, FanoutError>(capacity: Self.replayPiecesAhead) { emit throws(FanoutError) in
            var bytes: [UInt8] = []
            for name in segments {
                var stopped = false
                let contents = try Self.readSegment(directory, name, into: &bytes) { batches in
                    stopped = stopped || !emit(.batches(batches))
                }
                guard !stopped, emit(.end(nextLSN: contents.nextLSN, damage: contents.damage)) else { return }
            }
        }
        defer { reader.stop() }
        var handOff = ReverseListHandOff()
        defer { handOff.thread?.stop() }
        for name in segments {
            let path = "\(directory)/\(name)"
            pieces: while true {
                switch try reader.next() {
                case .batches(let batches):
                    for batch in batches {
                        for (offset, record) in batch.records.enumerated() {
                            let lsn = batch.firstLSN + UInt64(offset)
                            guard lsn >= report.nextLSN else { continue }  // already in the snapshot
                            guard lsn < end else { break }
                            do {
                                try Self.apply(record, lsn: lsn, to: &projects, configuration: configuration, handOff: &handOff)
                            } catch {
                                throw FanoutError(.internal, "replaying LSN \(lsn) of \(path): \(error)")
                            }
                            report.records += 1
                            report.nextLSN = lsn + 1
                            if let collectFrom, lsn >= collectFrom { collected.append(record) }
                        }
                    }
                case .end(let nextLSN, let damage):
                    report.segments += 1
                    // Damage the checksum scan could not see (a record that does not decode) before the end.
                    if let damage, nextLSN < end {
                        throw FanoutError(
                            .internal,
                            "corruption in WAL segment \(path) \(damage) (LSN \(nextLSN)); \(Self.repairAdvice(directory))"
                        )
                    }
                    break pieces
                case nil:
                    throw FanoutError(.internal, "the log reader stopped before the end of \(path)")
                }
            }
        }
        try handOff.giveBack(to: &projects)
        // Every record up to the end was applied: none lost between the reader and this thread.
        guard report.nextLSN == end else {
            throw FanoutError(.internal, "the log in \(directory) ends at LSN \(report.nextLSN), expected \(end); \(Self.repairAdvice(directory))")
        }

        report.problems = scan.problems.map(\.description)
        return Replay(
            projects: projects,
            report: report,
            nextSegmentIndex: (scan.segments.last?.index).map { $0 + 1 } ?? 0,
            manifest: scan.manifest(after: plan),
            collected: collected
        )
    }

    /// The error start-up gives for a damaged log: every problem, what a repair would lose, and the command.
    private static func refusal(_ scan: WALScan, plan: WALPlan, directory: String) -> FanoutError {
        let problems = scan.problems.filter { !$0.kind.allowsStart || plan.lost != nil || plan.endIsUnknown }
        let listed = problems.map(\.description).joined(separator: "; ")
        return FanoutError(
            .internal,
            "the write-ahead log in \(directory) is damaged: \(listed). A repair keeps \(plan.keptDescription) (\(plan.lossDescription)); \(Self.repairAdvice(directory))"
        )
    }

    static func repairAdvice(_ directory: String) -> String {
        "`fanout wal repair \(directory) --dry-run` shows what a repair keeps and moves aside, `fanout wal repair \(directory)` does it"
    }

    /// Writes a snapshot of the whole state while the engine keeps serving (every project lock is
    /// held only while the states are copied, which is copy-on-write), then deletes what it makes
    /// unnecessary (`EngineConfiguration.logRetention`): the segments it covers, or those the
    /// snapshot before it covers, and snapshots older than those two. Returns the snapshot's path.
    /// - Throws: `FAILED_PRECONDITION` for an in-memory engine and once the engine is closed (a
    ///   snapshot being written when `close()` is called finishes first); `UNAVAILABLE` when the
    ///   log has failed or the file cannot be written.
    @discardableResult
    public func snapshot() throws(FanoutError) -> String {
        try self.snapshot(waitingForTheReplicaAtMost: .seconds(10))
    }

    /// `snapshot()`; a shard owner's snapshot also waits until its replica holds every record it
    /// covers (at most `limit`), since the log before a snapshot is not read again at start, and
    /// what the replica lacks must be published from the log.
    /// - Throws: `UNAVAILABLE` when the replica does not hold them in time (NATS unreachable).
    package func snapshot(waitingForTheReplicaAtMost limit: Duration) throws(FanoutError) -> String {
        try self.snapshotting.withLock { _ throws(FanoutError) in
            guard self.directory == nil || self.holdsItsDirectory else {
                throw FanoutError(.failedPrecondition, "the engine is closed: it no longer holds its data directory")
            }
            return try self.writeSnapshot(waitingForTheReplicaAtMost: limit)
        }
    }

    private func writeSnapshot(waitingForTheReplicaAtMost limit: Duration) throws(FanoutError) -> String {
        guard let wal = self.wal, let directory = self.directory else {
            throw FanoutError(.failedPrecondition, "an in-memory engine has no data directory to snapshot")
        }
        try wal.checkHealthy()
        let started = ContinuousClock.now
        let (states, boundary) = self.projects.withLock { projects -> ([ProjectState], LogTicket) in
            let boxes = projects.sorted { $0.key < $1.key }.map(\.value)
            var states: [ProjectState] = []
            func capture(_ index: Int) -> LogTicket {
                guard index < boxes.count else { return wal.nextRecordLSN }
                return boxes[index].state.withLock { state in
                    states.append(state)
                    return capture(index + 1)
                }
            }
            let boundary = capture(0)
            return (states, boundary)
        }
        // The states hold every change before the boundary: the snapshot may only exist once they
        // are all durable (a change the log then refuses must not come back from a snapshot).
        try wal.waitUntilAcknowledged(boundary)
        if let log = self.log, log !== wal {
            // A replicated log acknowledges once its replica holds the records too.
            try log.waitUntilAcknowledged(boundary, atMost: limit)
        }
        let lsn = boundary.lsn
        // The segment being written ends here, so that the ones before the kept base can go.
        try wal.roll()
        let path: String
        do {
            path = try Snapshot.write(states, lsn: lsn, directory: directory)
        } catch {
            throw FanoutError(.unavailable, "cannot write a snapshot: \(error)")
        }
        self.metrics.recordSnapshot(duration: ContinuousClock.now - started, bytes: try? FileIO.size(of: path))
        do {
            try self.fileMaintenance.withLock { _ throws(FileIO.Error) in
                try Self.removeFiles(coveredBy: lsn, retention: self.configuration.logRetention, manifest: wal.manifest, in: directory)
            }
        } catch {
            throw FanoutError(.unavailable, "the snapshot \(path) is written, but the files it replaces could not be removed: \(error)")
        }
        return path
    }

    /// Keeps the snapshot at `lsn` and the one before it, and the log from the retention's base on:
    /// `lsn`, or the previous snapshot's LSN (0 without one). A segment goes when the next one
    /// starts at or before the base; older snapshots go too. The manifest says so first, so a crash
    /// in between leaves only files it no longer lists.
    private static func removeFiles(
        coveredBy lsn: UInt64,
        retention: LogRetention,
        manifest: WALManifestKeeper,
        in directory: String
    ) throws(FileIO.Error) {
        let names = try FileIO.list(directory)
        let snapshots = names.compactMap(Snapshot.lsn(ofFileName:)).filter { $0 <= lsn }.sorted()
        let kept = Array(snapshots.suffix(2))
        let base: UInt64
        switch retention {
        case .sinceNewestSnapshot: base = lsn
        case .sincePreviousSnapshot: base = kept.count == 2 ? kept[0] : 0
        }
        let listed = manifest.current.segments
        var firstKept = listed.first?.index ?? 0
        for position in listed.indices.dropLast() {
            guard listed[position + 1].firstLSN <= base else { break }
            firstKept = listed[position + 1].index
        }
        try manifest.retain(snapshots: kept, segmentsFrom: firstKept)
        for snapshot in snapshots where !kept.contains(snapshot) {
            try FileIO.unlink("\(directory)/\(Snapshot.fileName(lsn: snapshot))")
        }
        for name in WALWriter.segmentNames(among: names) {
            guard let index = WALWriter.index(ofSegmentName: name), index < firstKept else { continue }
            try FileIO.unlink("\(directory)/\(name)")
        }
        try FileIO.syncDirectory(directory)
    }

    /// Reads a segment into `bytes` (its storage reused) and decodes it, handing its good batches
    /// to `emit` about `replayPieceRecords` records at a time, as they decode; returns the
    /// segment's contents (their batches without records).
    private static func readSegment(
        _ directory: String,
        _ name: String,
        into bytes: inout [UInt8],
        emit: ([WALBatch]) -> Void
    ) throws(FanoutError) -> WALSegmentContents {
        let path = "\(directory)/\(name)"
        try FileIO.logFile(path, into: &bytes)
        var piece: [WALBatch] = []
        var records = 0
        do {
            let contents = try WALSegmentReader.read(bytes, expectedIndex: WALWriter.index(ofSegmentName: name)) { batch in
                piece.append(batch)
                records += batch.records.count
                if records >= Self.replayPieceRecords {
                    emit(piece)
                    piece.removeAll()
                    records = 0
                }
            }
            if !piece.isEmpty { emit(piece) }
            return contents
        } catch {
            throw FanoutError(.internal, "corrupt WAL segment \(path) \(error); \(Self.repairAdvice(directory))")
        }
    }

    /// About how many records the log reader hands over at a time, and how many such pieces it
    /// may decode ahead of the replay.
    private static let replayPieceRecords = 4096
    private static let replayPiecesAhead = 16

    /// What the log reader hands the replaying thread: decoded batches, then their segment's end.
    private enum ReplayPiece: Sendable {
        case batches([WALBatch])
        /// The LSN after the segment's good batches, and damage the reader found after them.
        case end(nextLSN: UInt64, damage: WALDamage?)
    }

    /// Applies `record` as `apply(_:to:configuration:)` does, except that subscriptions' reverse-list
    /// entries are made on `handOff`'s thread once a subscription record names at least
    /// `ReverseListHandOff.minimumInstallations` installations: from then on the thread holds that
    /// project's lists while registrations and the project's subscriptions replay (they do not
    /// read them), and gives them back before any other record.
    private static func apply(
        _ record: WALRecord,
        lsn: UInt64,
        to projects: inout [ProjectID: ProjectState],
        configuration: EngineConfiguration,
        handOff: inout ReverseListHandOff
    ) throws(FanoutError) {
        if case .subscribe(let project, let topic, let installations) = record,
            handOff.takes(project, installations.count),
            let index = projects.index(forKey: project)
        {
            let thread = handOff.thread(holding: project, of: &projects.values[index])
            let (id, added) = try projects.values[index].replaySubscriptionSet(installations, to: topic)
            try thread.append(id, to: added, lsn: lsn)
            return
        }
        if case .register = record {} else {
            try handOff.giveBack(to: &projects)
        }
        try Self.apply(record, to: &projects, configuration: configuration)
    }

    /// A replay's `ReverseListThread` (started by the first subscription record large enough to
    /// hand off), and the project whose reverse lists it holds.
    private struct ReverseListHandOff {
        /// Below this many installations, a record's entries cost less than handing them over.
        static let minimumInstallations = 256

        var thread: ReverseListThread?
        var holder: ProjectID?

        /// Whether a subscription record of `project` naming `count` installations goes to the thread.
        func takes(_ project: ProjectID, _ count: Int) -> Bool {
            self.holder == project || (self.holder == nil && count >= Self.minimumInstallations)
        }

        /// The thread (started now if need be), holding `state`'s reverse lists: taken out of it
        /// unless the thread holds them already.
        mutating func thread(holding project: ProjectID, of state: inout ProjectState) -> ReverseListThread {
            let thread = self.thread ?? ReverseListThread()
            self.thread = thread
            if self.holder == nil {
                thread.begin(state.topics.takeReverseLists())
                self.holder = project
            }
            return thread
        }

        /// Waits for the thread's entries and puts the lists back into their project.
        mutating func giveBack(to projects: inout [ProjectID: ProjectState]) throws(FanoutError) {
            guard let holder, let thread else { return }
            self.holder = nil
            let lists = try thread.end()
            // The holder is there: deleting a project gives its lists back first.
            if let index = projects.index(forKey: holder) {
                projects.values[index].topics.restoreReverseLists(lists)
            }
        }
    }

    private static func apply(
        _ record: WALRecord,
        to projects: inout [ProjectID: ProjectState],
        configuration: EngineConfiguration
    ) throws(FanoutError) {
        switch record {
        case .createProject(let id):
            guard projects[id] == nil else { throw FanoutError(.internal, "project \(id) created twice") }
            projects[id] = ProjectState(id: id, configuration: configuration)
        case .deleteProject(let id):
            guard projects.removeValue(forKey: id) != nil else { throw FanoutError(.internal, "unknown project \(id) deleted") }
        default:
            // Through the index, so the project's state is changed in place, never copied.
            guard let index = projects.index(forKey: record.project) else {
                throw FanoutError(.internal, "a record for unknown project \(record.project)")
            }
            try projects.values[index].replay(record)
        }
    }
}
