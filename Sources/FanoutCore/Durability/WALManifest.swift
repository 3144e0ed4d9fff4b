import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// `DIR/MANIFEST`: what the log should hold, so that a missing or shortened file is noticed.
///
/// Rewritten (temporary name, sync, rename, directory sync) whenever a segment starts and after
/// every snapshot. A small text file:
/// ```
/// fanout-manifest 1
/// segment 0 0 1200 65514         closed: index, first LSN, end LSN, bytes
/// segment 1 1200 open            the newest, being written
/// snapshot 950                   a snapshot kept, by LSN
/// checksum 1a2b3c4d              CRC-32C of every byte before this line, 8 hex digits
/// ```
package struct WALManifest: Hashable, Sendable {
    package struct Segment: Hashable, Sendable {
        package var index: UInt64
        package var firstLSN: UInt64
        /// For a closed segment: the LSN after its last record and its size in bytes.
        package var end: End?

        package struct End: Hashable, Sendable {
            package var lsn: UInt64
            package var bytes: Int
        }
    }

    /// Oldest first; the last one is open unless the manifest was written offline by a repair.
    package var segments: [Segment] = []
    /// The LSNs of the snapshots kept, oldest first.
    package var snapshots: [UInt64] = []

    static let fileName = "MANIFEST"
    private static let firstLine = "fanout-manifest 1"

    package init(segments: [Segment] = [], snapshots: [UInt64] = []) {
        self.segments = segments
        self.snapshots = snapshots
    }

    func encoded() -> [UInt8] {
        var text = Self.firstLine + "\n"
        for segment in self.segments {
            if let end = segment.end {
                text += "segment \(segment.index) \(segment.firstLSN) \(end.lsn) \(end.bytes)\n"
            } else {
                text += "segment \(segment.index) \(segment.firstLSN) open\n"
            }
        }
        for lsn in self.snapshots { text += "snapshot \(lsn)\n" }
        var bytes = Array(text.utf8)
        let crc = bytes.withUnsafeBytes { CRC32C.checksum($0) }
        let hex = String(crc, radix: 16)
        bytes += Array("checksum \(String(repeating: "0", count: 8 - hex.count))\(hex)\n".utf8)
        return bytes
    }

    /// Parses a manifest; any deviation from the format is damage, named by line.
    static func decode(_ bytes: [UInt8]) throws(WALDamage) -> WALManifest {
        guard let checksumStart = Self.lastLineStart(bytes) else {
            throw WALDamage(offset: 0, reason: "the manifest has no checksum line")
        }
        let checksumLine = String(decoding: bytes[checksumStart...], as: UTF8.self)
        let expected = bytes[..<checksumStart].withUnsafeBytes { CRC32C.checksum($0) }
        guard checksumLine.hasPrefix("checksum "), checksumLine.hasSuffix("\n"),
            let stored = UInt32(checksumLine.dropFirst(9).dropLast(), radix: 16)
        else {
            throw WALDamage(offset: checksumStart, reason: "the manifest's checksum line is malformed")
        }
        guard stored == expected else { throw WALDamage(offset: checksumStart, reason: "manifest checksum mismatch") }
        let lines = String(decoding: bytes[..<checksumStart], as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        guard lines.first == Substring(Self.firstLine) else { throw WALDamage(offset: 0, reason: "not a fanout manifest (first line)") }
        var manifest = WALManifest()
        for (number, line) in lines.enumerated().dropFirst() {
            let fields = line.split(separator: " ")
            func number64(_ field: Int) throws(WALDamage) -> UInt64 {
                guard field < fields.count, let value = UInt64(fields[field]) else {
                    throw WALDamage(offset: 0, reason: "manifest line \(number + 1) is malformed")
                }
                return value
            }
            switch fields.first {
            case "segment" where fields.count == 4 && fields[3] == "open":
                manifest.segments.append(Segment(index: try number64(1), firstLSN: try number64(2), end: nil))
            case "segment" where fields.count == 5:
                let end = Segment.End(lsn: try number64(3), bytes: Int(truncatingIfNeeded: try number64(4)))
                manifest.segments.append(Segment(index: try number64(1), firstLSN: try number64(2), end: end))
            case "snapshot" where fields.count == 2:
                manifest.snapshots.append(try number64(1))
            default:
                throw WALDamage(offset: 0, reason: "manifest line \(number + 1) is malformed")
            }
        }
        return manifest
    }

    private static func lastLineStart(_ bytes: [UInt8]) -> Int? {
        guard bytes.last == UInt8(ascii: "\n"), bytes.count >= 2 else { return nil }
        var index = bytes.count - 2
        while index >= 0 && bytes[index] != UInt8(ascii: "\n") { index -= 1 }
        return index < 0 ? nil : index + 1
    }

    /// The manifest of `directory`: nil when there is none (a directory from before manifests, or
    /// a new one).
    static func read(directory: String) throws(FileIO.Error) -> [UInt8]? {
        let path = "\(directory)/\(Self.fileName)"
        guard access(path, F_OK) == 0 else { return nil }
        return try FileIO.readAll(path)
    }

    /// Replaces the directory's manifest durably.
    func write(directory: String) throws(FileIO.Error) {
        try FileIO.replaceDurably("\(directory)/\(Self.fileName)", with: self.encoded(), directory: directory)
    }
}

/// The manifest the engine keeps current: the writer thread records each new segment, a snapshot
/// records what it kept. Each change is written before the call returns.
final class WALManifestKeeper: Sendable {
    private let directory: String
    private let manifest: Mutex<WALManifest>

    init(directory: String, manifest: WALManifest) {
        self.directory = directory
        self.manifest = Mutex(manifest)
    }

    var current: WALManifest { self.manifest.withLock { $0 } }

    /// Closes the newest segment at `end` (if one is open) and records segment `index` as the open one.
    func segmentStarted(index: UInt64, firstLSN: UInt64, closingAt end: WALManifest.Segment.End?) throws(FileIO.Error) {
        try self.manifest.withLock { (manifest: inout WALManifest) throws(FileIO.Error) in
            if let end, let last = manifest.segments.indices.last, manifest.segments[last].end == nil {
                manifest.segments[last].end = end
            }
            manifest.segments.append(WALManifest.Segment(index: index, firstLSN: firstLSN, end: nil))
            try manifest.write(directory: self.directory)
        }
    }

    /// Forgets segment `index` when it is the open one and not the only one (it holds no record:
    /// the engine closes without having written any); returns whether it did. The segment before
    /// it stays closed where it was.
    func segmentDiscarded(index: UInt64) throws(FileIO.Error) -> Bool {
        try self.manifest.withLock { (manifest: inout WALManifest) throws(FileIO.Error) -> Bool in
            guard manifest.segments.count > 1, let last = manifest.segments.last, last.index == index, last.end == nil else { return false }
            manifest.segments.removeLast()
            try manifest.write(directory: self.directory)
            return true
        }
    }

    /// Records that the log now keeps `snapshots` and the segments from `firstSegment` on.
    func retain(snapshots: [UInt64], segmentsFrom firstSegment: UInt64) throws(FileIO.Error) {
        try self.manifest.withLock { (manifest: inout WALManifest) throws(FileIO.Error) in
            manifest.snapshots = snapshots
            manifest.segments.removeAll { $0.index < firstSegment }
            try manifest.write(directory: self.directory)
        }
    }
}
