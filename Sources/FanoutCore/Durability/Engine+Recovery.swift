import Synchronization

#if canImport(Glibc)
import Glibc
#endif

extension Engine {
    /// The default size at which the log starts a new segment.
    public static let defaultSegmentSize = 64 << 20

    /// Opens (or creates) a data directory: takes its lock, replays the write-ahead log, cuts a
    /// torn tail of the last segment, and starts logging to a new segment.
    ///
    /// - Throws: `UNAVAILABLE` when the directory is locked by another process or cannot be read or
    ///   written; `INTERNAL` when a segment other than the last is damaged (the error names the
    ///   file and offset; `fanout wal repair` can cut there on purpose) or the log contradicts itself.
    public convenience init(
        directory: String,
        durability: Durability = .always,
        segmentSize: Int = Engine.defaultSegmentSize,
        configuration: EngineConfiguration = EngineConfiguration(),
        clock: any WallClock = SystemWallClock()
    ) throws(FanoutError) {
        let started = ContinuousClock.now
        let lock: Int32
        do {
            try FileIO.makeDirectory(directory)
            lock = try FileIO.lockExclusively("\(directory)/LOCK")
        } catch {
            throw FanoutError(.unavailable, "cannot lock the data directory (is another fanout using it?): \(error)")
        }
        do {
            var replay = try Self.replayLog(in: directory, configuration: configuration)
            let wal = try WALWriter(
                directory: directory,
                durability: durability,
                segmentSize: segmentSize,
                segmentIndex: replay.nextSegmentIndex,
                nextLSN: replay.report.nextLSN
            )
            // Delivery counters count what happens from now on; replay rebuilt the state, not events.
            for id in replay.projects.keys {
                replay.projects[id]!.deliveries.counters = DeliveryStatistics()
            }
            replay.report.duration = ContinuousClock.now - started
            self.init(
                configuration: configuration,
                clock: clock,
                projects: replay.projects,
                wal: wal,
                directory: directory,
                directoryLock: lock,
                recovery: replay.report
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
    }

    /// Loads the newest readable snapshot of `directory`, then replays the log from its LSN.
    static func replayLog(in directory: String, configuration: EngineConfiguration) throws(FanoutError) -> Replay {
        var projects: [ProjectID: ProjectState] = [.default: ProjectState(id: .default, configuration: configuration)]
        var report = RecoveryReport(segments: 0, records: 0, nextLSN: 0, truncatedTail: nil, duration: .zero)
        let names: [String]
        do {
            names = try FileIO.list(directory)
        } catch {
            throw FanoutError(.unavailable, "cannot read the data directory: \(error)")
        }
        // Half-written segments and snapshots (a crash before the rename) hold nothing acknowledged.
        for name in names where name.hasSuffix(".tmp") {
            _ = unlink("\(directory)/\(name)")
        }

        // The newest snapshot that reads back completely; an unreadable one is skipped (reported).
        var snapshotLSN: UInt64 = 0
        for name in names.filter({ Snapshot.lsn(ofFileName: $0) != nil }).sorted().reversed() {
            let path = "\(directory)/\(name)"
            do {
                var restored: [ProjectID: ProjectState] = [.default: ProjectState(id: .default, configuration: configuration)]
                let (lsn, count) = try Snapshot.read(path) { record in
                    try Self.apply(record, to: &restored, configuration: configuration)
                }
                projects = restored
                snapshotLSN = lsn
                report.snapshot = (path, lsn, count)
                break
            } catch {
                report.skippedSnapshots.append("\(path): \(error)")
            }
        }
        report.nextLSN = snapshotLSN

        let segments = WALWriter.segmentNames(among: names)
        var expectedIndex: UInt64? = nil
        // Segments are read and decoded on a thread of their own, one ahead of the one being applied.
        let reader = ProducerThread<WALSegmentContents>(capacity: 1) { emit in
            for name in segments {
                guard emit(try Self.readSegment("\(directory)/\(name)")) else { return }
            }
        }
        defer { reader.stop() }
        for (position, name) in segments.enumerated() {
            let path = "\(directory)/\(name)"
            let isLast = position == segments.count - 1
            let next: WALSegmentContents?
            do {
                next = try reader.next()
            } catch let error as FanoutError {
                throw error
            } catch {
                throw FanoutError(.internal, "reading \(path): \(error)")
            }
            guard let contents = next else { throw FanoutError(.internal, "the log reader stopped before \(path)") }
            if let expectedIndex, contents.index != expectedIndex {
                throw FanoutError(.internal, "WAL segment \(path) has index \(contents.index), expected \(expectedIndex) (a segment is missing)")
            }
            // The log must continue where the snapshot (or the previous segment) ends.
            if contents.firstLSN > report.nextLSN {
                throw FanoutError(
                    .internal,
                    "WAL segment \(path) starts at LSN \(contents.firstLSN), but the state before it ends at \(report.nextLSN) (records are missing)"
                        + (report.skippedSnapshots.isEmpty ? "" : "; unreadable snapshots: \(report.skippedSnapshots.joined(separator: "; "))")
                )
            }
            for batch in contents.batches {
                for (offset, record) in batch.records.enumerated() {
                    let lsn = batch.firstLSN + UInt64(offset)
                    guard lsn >= report.nextLSN else { continue }  // already in the snapshot
                    do {
                        try Self.apply(record, to: &projects, configuration: configuration)
                    } catch {
                        throw FanoutError(.internal, "replaying LSN \(lsn) of \(path): \(error)")
                    }
                    report.records += 1
                    report.nextLSN = lsn + 1
                }
            }
            report.segments += 1
            report.nextLSN = max(report.nextLSN, contents.nextLSN)
            expectedIndex = contents.index + 1
            if let damage = contents.damage {
                guard isLast else {
                    throw FanoutError(
                        .internal,
                        "corrupt WAL segment \(path) \(damage) (not the last segment; `fanout wal repair` can cut the log there)"
                    )
                }
                do {
                    try FileIO.truncate(path, to: contents.validLength)
                } catch {
                    throw FanoutError(.unavailable, "cannot cut the torn tail of \(path): \(error)")
                }
                report.truncatedTail = (path, contents.validLength, damage.reason)
            }
        }
        return Replay(projects: projects, report: report, nextSegmentIndex: expectedIndex ?? 0)
    }

    /// Writes a snapshot of the whole state while the engine keeps serving (every project lock is
    /// held only while the states are copied, which is copy-on-write), then deletes the log
    /// segments and snapshots it makes unnecessary. Returns the snapshot's path.
    @discardableResult
    public func snapshot() throws(FanoutError) -> String {
        guard let wal = self.wal, let directory = self.directory else {
            throw FanoutError(.failedPrecondition, "an in-memory engine has no data directory to snapshot")
        }
        let (states, lsn) = self.projects.withLock { projects -> ([ProjectState], UInt64) in
            let boxes = projects.sorted { $0.key < $1.key }.map(\.value)
            var states: [ProjectState] = []
            func capture(_ index: Int) -> UInt64 {
                guard index < boxes.count else { return wal.nextRecordLSN }
                return boxes[index].state.withLock { state in
                    states.append(state)
                    return capture(index + 1)
                }
            }
            let lsn = capture(0)
            return (states, lsn)
        }
        wal.requestRoll()
        let path: String
        do {
            path = try Snapshot.write(states, lsn: lsn, directory: directory)
        } catch {
            throw FanoutError(.unavailable, "cannot write a snapshot: \(error)")
        }
        Self.removeFiles(coveredBy: lsn, keeping: path, in: directory)
        return path
    }

    /// Deletes snapshots older than `keeping` and segments whose records all precede `lsn`
    /// (a segment goes when the next one starts at or before `lsn`).
    private static func removeFiles(coveredBy lsn: UInt64, keeping snapshot: String, in directory: String) {
        guard let names = try? FileIO.list(directory) else { return }
        for name in names where Snapshot.lsn(ofFileName: name) != nil && "\(directory)/\(name)" != snapshot {
            _ = unlink("\(directory)/\(name)")
        }
        let segments = WALWriter.segmentNames(among: names)
        let firstLSNs = segments.map { name -> UInt64? in
            guard let header = try? FileIO.readPrefix("\(directory)/\(name)", count: WALFormat.segmentHeaderSize),
                header.count == WALFormat.segmentHeaderSize
            else { return nil }
            var reader = BinaryReader(header, from: 24)
            return try? reader.read(UInt64.self)
        }
        for index in segments.indices.dropLast() {
            guard let next = firstLSNs[index + 1], next <= lsn else { break }
            _ = unlink("\(directory)/\(segments[index])")
        }
        _ = try? FileIO.syncDirectory(directory)
    }

    /// Reads and decodes one log segment.
    private static func readSegment(_ path: String) throws(FanoutError) -> WALSegmentContents {
        let bytes: [UInt8]
        do {
            bytes = try FileIO.readAll(path)
        } catch {
            throw FanoutError(.unavailable, "cannot read \(path): \(error)")
        }
        do {
            return try WALSegmentReader.read(bytes)
        } catch {
            throw FanoutError(.internal, "corrupt WAL segment \(path) \(error)")
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
