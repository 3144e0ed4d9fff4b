#if canImport(Glibc)
import Glibc
#endif

/// Offline access to a data directory's log, for `fanout wal inspect|verify|repair`.
package enum WALDirectory {
    /// The whole directory examined: every segment decoded, every snapshot read back. Takes the
    /// directory's lock, so it refuses to run beside an engine.
    package static func examine(_ directory: String) throws(FanoutError) -> WALScan {
        let lock = try Self.lock(directory)
        defer { close(lock) }
        return try WALScan.examine(directory, decodeRecords: true, checkSnapshots: true)
    }

    /// What a repair did (or, dry, would do).
    package struct Repair: Sendable {
        package var plan: WALPlan
        /// Whether the actions were carried out (false for a dry run, or a lossy repair not allowed).
        package var applied: Bool
        /// One line per change, in the order made: what was cut, moved aside or rewritten, and where it went.
        package var actions: [String]
    }

    /// Brings the directory to a state that starts, keeping the longest intact prefix of the log
    /// (`WALScan.plan`): a damaged segment is cut at its last good batch, segments and snapshots
    /// that cannot be used are moved to `quarantine/` (as are the cut-off bytes and replaced
    /// headers, so nothing is deleted), damaged headers are rewritten from the file name and the
    /// first batch, and the manifest is rewritten to match. With `dryRun`, or when the repair would
    /// lose acknowledged records and `allowingLoss` is false, nothing is changed (`applied` false).
    package static func repair(_ directory: String, dryRun: Bool, allowingLoss: Bool = true) throws(FanoutError) -> Repair {
        let lock = try Self.lock(directory)
        defer { close(lock) }
        let scan = try WALScan.examine(directory, decodeRecords: true, checkSnapshots: true)
        let plan = scan.plan()
        let dryRun = dryRun || (!allowingLoss && (plan.lost != nil || plan.endIsUnknown))
        var actions: [String] = []
        func verb(_ done: String, _ planned: String) -> String { dryRun ? "would " + planned : done }
        do throws(FileIO.Error) {
            for name in plan.droppedSnapshots {
                let target = dryRun ? "quarantine/" : try Quarantine.move(name, in: directory)
                actions.append("\(verb("moved", "move")) the damaged snapshot \(name) to \(target)")
            }
            for name in plan.droppedSegments {
                let target = dryRun ? "quarantine/" : try Quarantine.move(name, in: directory)
                actions.append("\(verb("moved", "move")) \(name) to \(target)")
            }
            if let cut = plan.cut {
                let target = dryRun ? "quarantine/" : (try Quarantine.cut(cut.segment, at: cut.offset, in: directory) ?? "quarantine/")
                actions.append("\(verb("cut", "cut")) \(cut.segment) at byte \(cut.offset) (LSN \(cut.lsn)), keeping the bytes cut off in \(target)")
            }
            for name in plan.headerRewrites {
                guard let segment = scan.segments.first(where: { $0.name == name }), let contents = segment.contents else { continue }
                if !dryRun {
                    let path = "\(directory)/\(name)"
                    let header = try FileIO.readPrefix(path, count: WALFormat.segmentHeaderSize)
                    try Quarantine.keep(header, of: name, suffix: ".header", in: directory)
                    try Self.rewriteHeader(path, index: segment.index, firstLSN: contents.firstLSN)
                }
                let fields = contents.headerDamage.map(\.field).joined(separator: ", ")
                actions.append("\(verb("rewrote", "rewrite")) the header of \(name) (\(fields)) as index \(segment.index), first LSN \(contents.firstLSN)")
            }
            let manifest = scan.manifest(after: plan)
            if manifest != scan.manifest {
                if !dryRun { try manifest.write(directory: directory) }
                actions.append("\(verb("wrote", "write")) the manifest: \(manifest.segments.count) segments, \(manifest.snapshots.count) snapshots")
            }
        } catch {
            throw FanoutError(.unavailable, "repair failed: \(error)")
        }
        return Repair(plan: plan, applied: !dryRun, actions: actions)
    }

    private static func rewriteHeader(_ path: String, index: UInt64, firstLSN: UInt64) throws(FileIO.Error) {
        let descriptor = try FileIO.open(path, O_WRONLY)
        defer { close(descriptor) }
        let header = WALFormat.segmentHeader(index: index, firstLSN: firstLSN)
        let written = header.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
        guard written == header.count else { throw FileIO.Error(operation: "pwrite", path: path, code: errno) }
        try FileIO.dataSync(descriptor, path: path)
    }

    private static func lock(_ directory: String) throws(FanoutError) -> Int32 {
        guard FileIO.exists(directory) else { throw FanoutError(.notFound, "no data directory \(directory)") }
        do {
            return try FileIO.lockExclusively("\(directory)/LOCK")
        } catch {
            throw FanoutError(.unavailable, "cannot lock \(directory) (is fanout running on it?): \(error)")
        }
    }
}
