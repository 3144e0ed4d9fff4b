#if canImport(Glibc)
import Glibc
#endif

/// A data directory's log examined as a whole: every segment, the snapshots and the manifest,
/// what is wrong with them, and the longest intact prefix of the log they hold (`plan`).
///
/// Start-up, `fanout wal verify` and `fanout wal repair` all decide from this, so they always agree.
package struct WALScan: Sendable {
    package struct SegmentFile: Sendable {
        package var name: String
        /// The index in the file's name.
        package var index: UInt64
        package var size: Int
        /// What reading found; nil when the header is unusable.
        package var contents: WALSegmentContents?
        /// Why the header is unusable.
        package var unreadable: WALDamage?
        /// Not read (start-up's scan skips segments a snapshot covers): only the header's first LSN is known.
        package var skippedFirstLSN: UInt64?

        var isSkipped: Bool { self.skippedFirstLSN != nil }
    }

    package struct SnapshotFile: Sendable {
        package var name: String
        package var lsn: UInt64
        /// Why the file does not read back (nil: intact, or not checked).
        package var damage: String?
        /// How many records it holds, once checked.
        package var records: Int?
    }

    package let directory: String
    /// The manifest as read (nil when there is none or it is damaged).
    package var manifest: WALManifest?
    package var manifestDamage: WALDamage?
    /// Segments in index order.
    package var segments: [SegmentFile]
    /// Snapshots, oldest first.
    package var snapshots: [SnapshotFile]

    /// Reads every segment (and, with `checkSnapshots`, every snapshot) of `directory`.
    /// - Parameters:
    ///   - decodeRecords: `false` checks the segments' checksums, lengths and LSNs only.
    ///   - skippingCoveredSegments: start-up's shortcut: segments whose successor starts at or before
    ///     the newest snapshot's LSN are not read, only their headers' first LSNs.
    package static func examine(
        _ directory: String,
        decodeRecords: Bool = true,
        checkSnapshots: Bool = true,
        skippingCoveredSegments: Bool = false
    ) throws(FanoutError) -> WALScan {
        let names: [String]
        do {
            names = try FileIO.list(directory)
        } catch {
            throw FanoutError(.unavailable, "cannot read the data directory: \(error)")
        }
        var scan = WALScan(directory: directory, manifest: nil, manifestDamage: nil, segments: [], snapshots: [])
        do {
            if let bytes = try WALManifest.read(directory: directory) {
                do {
                    scan.manifest = try WALManifest.decode(bytes)
                } catch {
                    scan.manifestDamage = error
                }
            }
        } catch {
            throw FanoutError(.unavailable, "cannot read \(directory)/\(WALManifest.fileName): \(error)")
        }
        let segmentNames = WALWriter.segmentNames(among: names)
        var skipped: [String: UInt64] = [:]
        if skippingCoveredSegments, let coveredLSN = names.compactMap(Snapshot.lsn(ofFileName:)).max() {
            let firstLSNs = segmentNames.map { Self.headerFirstLSN("\(directory)/\($0)") }
            for position in segmentNames.indices.dropLast() {
                guard let first = firstLSNs[position], let next = firstLSNs[position + 1], next <= coveredLSN else { break }
                skipped[segmentNames[position]] = first
            }
        }
        let covered = skipped
        let named = segmentNames.compactMap { name in WALWriter.index(ofSegmentName: name).map { (name: name, index: $0) } }
        // Each thread reads its segments into one buffer of its own (`FileIO.readAll(_:into:)`).
        let examineSegment = { (position: Int, bytes: inout [UInt8]) throws(FanoutError) -> SegmentFile in
            let (name, index) = named[position]
            let path = "\(directory)/\(name)"
            if let first = covered[name] {
                var status = stat()
                let size = stat(path, &status) == 0 ? Int(status.st_size) : 0
                return SegmentFile(name: name, index: index, size: size, contents: nil, skippedFirstLSN: first)
            }
            try FileIO.logFile(path, into: &bytes)
            do throws(WALDamage) {
                let contents = try WALSegmentReader.read(bytes, expectedIndex: index, decodeRecords: decodeRecords)
                return SegmentFile(name: name, index: index, size: bytes.count, contents: contents)
            } catch {
                return SegmentFile(name: name, index: index, size: bytes.count, contents: nil, unreadable: error)
            }
        }
        // Segments are independent: the odd ones are read and checked on a thread of their own
        // while this one takes the even ones (reading and checksums are most of a scan).
        let odd = ProducerThread<SegmentFile, FanoutError>(capacity: 1) { emit throws(FanoutError) in
            var bytes: [UInt8] = []
            for position in stride(from: 1, to: named.count, by: 2) {
                guard emit(try examineSegment(position, &bytes)) else { return }
            }
        }
        defer { odd.stop() }
        var bytes: [UInt8] = []
        for position in named.indices {
            if position % 2 == 0 {
                scan.segments.append(try examineSegment(position, &bytes))
                continue
            }
            guard let file = try odd.next() else { throw FanoutError(.internal, "the segment reader stopped before \(named[position].name)") }
            scan.segments.append(file)
        }
        for name in names.sorted() {
            guard let lsn = Snapshot.lsn(ofFileName: name) else { continue }
            var file = SnapshotFile(name: name, lsn: lsn)
            if checkSnapshots {
                do {
                    let (headerLSN, count) = try Snapshot.read("\(directory)/\(name)") { _ in }
                    if headerLSN == lsn {
                        file.records = count
                    } else {
                        file.damage = "its header says LSN \(headerLSN), its name \(lsn)"
                    }
                } catch {
                    file.damage = "\(error)"
                }
            }
            scan.snapshots.append(file)
        }
        scan.snapshots.sort { $0.lsn < $1.lsn }
        return scan
    }

    /// The first LSN a segment's header names (nil when the header cannot be read).
    private static func headerFirstLSN(_ path: String) -> UInt64? {
        guard let header = try? FileIO.readPrefix(path, count: WALFormat.segmentHeaderSize),
            header.count == WALFormat.segmentHeaderSize
        else { return nil }
        var reader = BinaryReader(header, from: 24)
        return try? reader.read(UInt64.self)
    }

    /// Records that a snapshot turned out damaged while it was loaded.
    mutating func markDamaged(snapshot name: String, _ reason: String) {
        if let index = self.snapshots.firstIndex(where: { $0.name == name }) { self.snapshots[index].damage = reason }
    }

    // MARK: - Problems

    /// Everything that is not as the writer leaves it, in log order.
    package var problems: [WALProblem] {
        var problems: [WALProblem] = []
        if let damage = self.manifestDamage {
            problems.append(WALProblem(.manifestDamaged, file: WALManifest.fileName, offset: damage.offset, "the manifest is damaged: \(damage.reason)"))
        } else if self.manifest == nil && (!self.segments.isEmpty || !self.snapshots.isEmpty) {
            problems.append(WALProblem(.manifestMissing, file: WALManifest.fileName, "there is no manifest (a directory written before manifests, or it was deleted): missing files cannot be told"))
        }
        for snapshot in self.snapshots {
            if let damage = snapshot.damage {
                problems.append(WALProblem(.snapshotDamaged, file: snapshot.name, lsn: snapshot.lsn, "the snapshot does not read back: \(damage)"))
            }
        }
        for lsn in self.manifest?.snapshots ?? [] where !self.snapshots.contains(where: { $0.lsn == lsn }) {
            problems.append(WALProblem(.snapshotMissing, file: Snapshot.fileName(lsn: lsn), lsn: lsn, "the snapshot at LSN \(lsn) is missing (the manifest lists it)"))
        }
        let onDisk = Set(self.segments.map(\.index))
        for listed in self.manifest?.segments ?? [] where !onDisk.contains(listed.index) {
            let held = listed.end.map { "LSNs \(listed.firstLSN)..<\($0.lsn)" } ?? "LSNs from \(listed.firstLSN) on"
            problems.append(WALProblem(.segmentMissing, file: WALWriter.segmentName(listed.index), lsn: listed.firstLSN, "the segment is missing (the manifest lists it, holding \(held))"))
        }
        if let first = self.segments.first?.contents, first.firstLSN > 0,
            !self.snapshots.contains(where: { $0.lsn >= first.firstLSN && $0.damage == nil })
        {
            let from = self.snapshots.last.map { "LSN \($0.lsn) (the newest snapshot)" } ?? "LSN 0 (there is no snapshot)"
            problems.append(WALProblem(.lsnGap, file: self.segments[0].name, lsn: first.firstLSN, "the log starts at LSN \(first.firstLSN), but the state it continues ends at \(from): records are missing"))
        }
        for (position, segment) in self.segments.enumerated() where !segment.isSkipped {
            let isLast = position == self.segments.count - 1
            guard let contents = segment.contents else {
                let reason = segment.unreadable?.reason ?? "unreadable"
                problems.append(WALProblem(.segmentUnreadable, file: segment.name, offset: 0, "the segment header is unusable: \(reason)"))
                continue
            }
            if position > 0 {
                let previous = self.segments[position - 1]
                if segment.index != previous.index + 1, !(self.manifest?.segments.contains { $0.index == previous.index + 1 } ?? false) {
                    problems.append(WALProblem(.segmentMissing, file: WALWriter.segmentName(previous.index + 1), "segment indexes jump from \(previous.index) to \(segment.index): a segment is missing"))
                }
                // A gap that an intact snapshot spans loses nothing (the log after it is what counts).
                let spanned = self.snapshots.contains { $0.damage == nil && $0.lsn >= contents.firstLSN }
                if let before = previous.contents, before.damage == nil, contents.firstLSN != before.nextLSN,
                    contents.firstLSN < before.nextLSN || !spanned
                {
                    let kind: WALProblem.Kind = contents.firstLSN > before.nextLSN ? .lsnGap : .lsnOverlap
                    problems.append(WALProblem(kind, file: segment.name, lsn: before.nextLSN, "the segment starts at LSN \(contents.firstLSN), but \(previous.name) ends at \(before.nextLSN)"))
                }
            }
            for damage in contents.headerDamage {
                problems.append(WALProblem(.headerDamaged, file: segment.name, offset: 0, "\(damage)"))
            }
            if let end = self.listedEnd(ifShortened: segment, contents) {
                problems.append(WALProblem(.segmentTruncated, file: segment.name, offset: segment.size, lsn: contents.nextLSN, "the segment is \(segment.size) bytes ending at LSN \(contents.nextLSN); the manifest says \(end.bytes) bytes ending at LSN \(end.lsn)"))
            }
            if let damage = contents.damage {
                let isTorn = isLast && contents.resumesAt == nil && !self.manifestListsSegments(after: segment.index)
                if isTorn {
                    problems.append(WALProblem(.tornTail, file: segment.name, offset: damage.offset, lsn: contents.damagedLSN, "a torn tail (an interrupted write; nothing valid follows): \(damage.reason)"))
                } else {
                    let after = contents.resumesAt.map { "; intact records follow at byte \($0.offset) (LSN \($0.lsn))" } ?? (isLast ? "" : "; later segments follow")
                    problems.append(WALProblem(.corruption, file: segment.name, offset: damage.offset, lsn: contents.damagedLSN, "\(damage.reason)\(after)"))
                }
            }
        }
        return problems
    }

    /// The end the manifest lists for a closed segment that is now shorter (in bytes, or, when its
    /// batches read cleanly, in LSNs); nil when it is not shorter or not listed.
    private func listedEnd(ifShortened segment: SegmentFile, _ contents: WALSegmentContents) -> WALManifest.Segment.End? {
        guard let end = self.manifest?.segments.first(where: { $0.index == segment.index })?.end,
            segment.size < end.bytes || (contents.damage == nil && contents.nextLSN < end.lsn)
        else { return nil }
        return end
    }

    /// The manifest of what `plan` keeps: the intact snapshots and every segment not dropped, all
    /// closed (the segment the plan cuts, at the cut; one not read, as the old manifest or the next
    /// segment's start says).
    func manifest(after plan: WALPlan) -> WALManifest {
        var manifest = WALManifest(snapshots: self.snapshots.filter { $0.damage == nil }.map(\.lsn))
        for (position, segment) in self.segments.enumerated() where !plan.droppedSegments.contains(segment.name) {
            if let first = segment.skippedFirstLSN {
                let next = self.segments[position + 1]
                let end = next.contents?.firstLSN ?? next.skippedFirstLSN ?? first
                let listed = self.manifest?.segments.first { $0.index == segment.index }
                manifest.segments.append(listed?.end != nil ? listed! : .init(index: segment.index, firstLSN: first, end: .init(lsn: end, bytes: segment.size)))
                continue
            }
            guard let contents = segment.contents else { continue }
            if let cut = plan.cut, cut.segment == segment.name {
                manifest.segments.append(.init(index: segment.index, firstLSN: contents.firstLSN, end: .init(lsn: cut.lsn, bytes: cut.offset)))
            } else {
                manifest.segments.append(.init(index: segment.index, firstLSN: contents.firstLSN, end: .init(lsn: contents.nextLSN, bytes: segment.size)))
            }
        }
        return manifest
    }

    private func manifestListsSegments(after index: UInt64) -> Bool {
        self.manifest?.segments.contains { $0.index > index } ?? false
    }

    // MARK: - The plan

    /// The longest intact prefix of the log and how to get there: the base to start from (the
    /// snapshot, or the empty state, from which the log reaches furthest) and the segments to replay.
    package func plan() -> WALPlan {
        var bases: [SnapshotFile?] = self.snapshots.filter { $0.damage == nil }.reversed()
        bases.append(nil)
        var best: WALPlan? = nil
        for base in bases {
            let candidate = self.plan(from: base)
            if best == nil || candidate.endLSN > best!.endLSN { best = candidate }
        }
        return best!
    }

    private func plan(from base: SnapshotFile?) -> WALPlan {
        let baseLSN = base?.lsn ?? 0
        var plan = WALPlan(snapshot: base?.name, baseLSN: baseLSN, endLSN: baseLSN, knownEndLSN: self.knownEndLSN, endIsUnknown: self.endIsUnknown)
        var position = 0
        var previous: SegmentFile? = nil
        // Segments entirely before the base are not needed (they stay for an older base); damaged
        // ones among them are dropped.
        while position < self.segments.count - 1 {
            let segment = self.segments[position]
            let next = self.segments[position + 1]
            let nextStartsInside = next.isSkipped || (next.contents.map { $0.firstLSN <= baseLSN } ?? false)
            let covered: Bool
            if segment.isSkipped {
                covered = true
            } else if let contents = segment.contents, contents.damage == nil {
                covered = contents.nextLSN <= baseLSN
            } else {
                covered = nextStartsInside
            }
            guard covered else { break }
            if !segment.isSkipped && (segment.contents?.damage != nil || segment.contents?.headerDamage.isEmpty == false || segment.contents == nil) {
                plan.droppedSegments.append(segment.name)
            }
            position += 1
        }
        while position < self.segments.count {
            let segment = self.segments[position]
            guard let contents = segment.contents,
                contents.firstLSN <= plan.endLSN,
                previous == nil || contents.firstLSN == plan.endLSN
            else { break }
            if let previous, segment.index != previous.index + 1, contents.firstLSN != plan.endLSN { break }
            plan.segments.append(segment.name)
            if !contents.headerDamage.isEmpty { plan.headerRewrites.append(segment.name) }
            previous = segment
            position += 1
            plan.endLSN = max(plan.endLSN, contents.nextLSN)
            if contents.damage != nil {
                plan.cut = (segment.name, contents.validLength, contents.nextLSN)
                break
            }
            if self.listedEnd(ifShortened: segment, contents) != nil {
                break  // a closed segment shortened at a batch boundary: what followed it is gone
            }
        }
        plan.droppedSegments += self.segments[position...].map(\.name)
        plan.droppedSnapshots = self.snapshots.filter { $0.damage != nil }.map(\.name)
        return plan
    }

    /// The LSN after the last record anything in the directory shows existed.
    var knownEndLSN: UInt64 {
        var end: UInt64 = 0
        for segment in self.segments {
            guard let contents = segment.contents else { continue }
            end = max(end, contents.highestEndLSN)
        }
        for snapshot in self.snapshots { end = max(end, snapshot.lsn) }
        for lsn in self.manifest?.snapshots ?? [] { end = max(end, lsn) }
        for listed in self.manifest?.segments ?? [] { end = max(end, listed.end?.lsn ?? listed.firstLSN) }
        return end
    }

    /// Whether the manifest lists a segment newer than every one on disk: how many records it
    /// held cannot be known.
    var endIsUnknown: Bool {
        guard let newest = self.manifest?.segments.last, newest.end == nil else { return false }
        guard let onDisk = self.segments.last?.index else { return true }
        return newest.index > onDisk
    }

    /// Whether start-up may proceed: nothing but a torn tail to cut, a missing manifest, or a
    /// damaged or missing snapshot that an older base makes up for without losing anything.
    package var allowsStart: Bool {
        let plan = self.plan()
        guard plan.lost == nil, !plan.endIsUnknown else { return false }
        return self.problems.allSatisfy { $0.kind.allowsStart }
    }
}

/// Something wrong in a data directory's log.
package struct WALProblem: Sendable, CustomStringConvertible {
    package enum Kind: String, Sendable {
        case tornTail = "torn tail"
        case corruption
        case headerDamaged = "damaged header"
        case segmentUnreadable = "unreadable segment"
        case segmentMissing = "missing segment"
        case segmentTruncated = "truncated segment"
        case lsnGap = "LSN gap"
        case lsnOverlap = "LSN overlap"
        case snapshotDamaged = "damaged snapshot"
        case snapshotMissing = "missing snapshot"
        case manifestDamaged = "damaged manifest"
        case manifestMissing = "no manifest"

        /// Problems start-up deals with itself (a torn tail is cut, a missing manifest is written)
        /// or that lose nothing when an older base reaches as far (snapshots).
        var allowsStart: Bool {
            switch self {
            case .tornTail, .manifestMissing, .snapshotDamaged, .snapshotMissing: return true
            default: return false
            }
        }
    }

    package var kind: Kind
    /// The file concerned (a name in the data directory).
    package var file: String
    package var offset: Int?
    package var lsn: UInt64?
    package var detail: String

    init(_ kind: Kind, file: String, offset: Int? = nil, lsn: UInt64? = nil, _ detail: String) {
        self.kind = kind
        self.file = file
        self.offset = offset
        self.lsn = lsn
        self.detail = detail
    }

    package var description: String {
        var place = self.file
        if let offset = self.offset { place += " at byte \(offset)" }
        if let lsn = self.lsn { place += " (LSN \(lsn))" }
        return "\(self.kind.rawValue): \(place): \(self.detail)"
    }
}

/// The longest intact prefix of a data directory's log, and what a repair does to keep exactly it.
package struct WALPlan: Sendable {
    /// The snapshot to start from; nil: the empty state at LSN 0.
    package var snapshot: String?
    package var baseLSN: UInt64
    /// The segments replayed, in order.
    package var segments: [String] = []
    /// Where the last replayed segment ends (everything from there is cut off), with the LSN cut at.
    package var cut: (segment: String, offset: Int, lsn: UInt64)?
    /// The LSN after the last record kept.
    package var endLSN: UInt64
    /// The LSN after the last record anything in the directory shows existed.
    package var knownEndLSN: UInt64
    /// A newest segment is missing: records past `knownEndLSN` may have existed too.
    package var endIsUnknown: Bool
    /// Segments that do not continue the kept prefix, or are damaged before it (moved to quarantine by a repair).
    package var droppedSegments: [String] = []
    /// Snapshots that do not read back (moved to quarantine).
    package var droppedSnapshots: [String] = []
    /// Kept segments whose header a repair rewrites from the file name and the first batch.
    package var headerRewrites: [String] = []

    init(snapshot: String?, baseLSN: UInt64, endLSN: UInt64, knownEndLSN: UInt64, endIsUnknown: Bool) {
        self.snapshot = snapshot
        self.baseLSN = baseLSN
        self.endLSN = endLSN
        self.knownEndLSN = knownEndLSN
        self.endIsUnknown = endIsUnknown
    }

    /// The LSNs that cannot be kept (nil: none known; see also `endIsUnknown`).
    package var lost: Range<UInt64>? {
        self.endLSN < self.knownEndLSN ? self.endLSN..<self.knownEndLSN : nil
    }

    /// What the prefix keeps, for people: "every LSN below N" or "nothing".
    package var keptDescription: String {
        self.endLSN == 0 ? "nothing of the log" : "every LSN below \(self.endLSN)"
    }

    /// One line on what is lost, for people.
    package var lossDescription: String {
        switch (self.lost, self.endIsUnknown) {
        case (nil, false): return "no acknowledged record is lost"
        case (let range?, false): return "LSNs \(range.lowerBound)..<\(range.upperBound) are lost (\(range.count) records)"
        case (let range?, true): return "LSNs from \(range.lowerBound) on are lost (at least \(range.count) records; a missing newest segment held an unknown number more)"
        case (nil, true): return "LSNs from \(self.endLSN) on are lost (a missing newest segment held an unknown number of records)"
        }
    }
}
