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
            replay.report.duration = ContinuousClock.now - started
            self.init(
                configuration: configuration,
                clock: clock,
                projects: replay.projects,
                wal: wal,
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

    /// Replays every segment of `directory` in order into fresh project states.
    static func replayLog(in directory: String, configuration: EngineConfiguration) throws(FanoutError) -> Replay {
        var projects: [ProjectID: ProjectState] = [.default: ProjectState(id: .default, configuration: configuration)]
        var report = RecoveryReport(segments: 0, records: 0, nextLSN: 0, truncatedTail: nil, duration: .zero)
        let names: [String]
        do {
            names = try FileIO.list(directory)
        } catch {
            throw FanoutError(.unavailable, "cannot read the data directory: \(error)")
        }
        // Half-created segments (crash before the rename) hold nothing acknowledged.
        for name in names where name.hasSuffix(WALWriter.segmentSuffix + ".tmp") {
            _ = unlink("\(directory)/\(name)")
        }
        let segments = names.filter { $0.hasPrefix("segment-") && $0.hasSuffix(WALWriter.segmentSuffix) }.sorted()
        var expectedIndex: UInt64? = nil
        for (position, name) in segments.enumerated() {
            let path = "\(directory)/\(name)"
            let isLast = position == segments.count - 1
            let bytes: [UInt8]
            do {
                bytes = try FileIO.readAll(path)
            } catch {
                throw FanoutError(.unavailable, "cannot read \(path): \(error)")
            }
            let contents: WALSegmentContents
            do {
                contents = try WALSegmentReader.read(bytes)
            } catch {
                throw FanoutError(.internal, "corrupt WAL segment \(path) \(error)")
            }
            if let expectedIndex, contents.index != expectedIndex {
                throw FanoutError(.internal, "WAL segment \(path) has index \(contents.index), expected \(expectedIndex) (a segment is missing)")
            }
            if report.segments > 0, contents.firstLSN != report.nextLSN {
                throw FanoutError(.internal, "WAL segment \(path) starts at LSN \(contents.firstLSN), expected \(report.nextLSN)")
            }
            for batch in contents.batches {
                for (offset, record) in batch.records.enumerated() {
                    do {
                        try Self.apply(record, to: &projects, configuration: configuration)
                    } catch {
                        throw FanoutError(.internal, "replaying LSN \(batch.firstLSN + UInt64(offset)) of \(path): \(error)")
                    }
                }
                report.records += batch.records.count
            }
            report.segments += 1
            report.nextLSN = contents.nextLSN
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
            guard projects[record.project] != nil else {
                throw FanoutError(.internal, "a record for unknown project \(record.project)")
            }
            try projects[record.project]!.replay(record)
        }
    }
}
