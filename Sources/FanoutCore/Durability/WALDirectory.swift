#if canImport(Glibc)
import Glibc
#endif

/// Offline access to a data directory's log, for `fanout wal inspect|verify|repair`.
public enum WALDirectory {
    /// One segment file and what reading it found.
    public struct Segment: Sendable {
        public var name: String
        public var path: String
        public var size: Int
        /// The readable part (nil when the header itself is damaged).
        public var contents: WALSegmentContents?
        /// The first damage in the file: a bad header, or the first bad batch.
        public var damage: WALDamage?
    }

    /// The segment files of `directory`, in order, each read and checked.
    public static func segments(in directory: String) throws(FanoutError) -> [Segment] {
        let names: [String]
        do {
            names = try FileIO.list(directory)
        } catch {
            throw FanoutError(.unavailable, "cannot read \(directory): \(error)")
        }
        var segments: [Segment] = []
        for name in WALWriter.segmentNames(among: names) {
            let path = "\(directory)/\(name)"
            let bytes: [UInt8]
            do {
                bytes = try FileIO.readAll(path)
            } catch {
                throw FanoutError(.unavailable, "cannot read \(path): \(error)")
            }
            do {
                let contents = try WALSegmentReader.read(bytes)
                segments.append(Segment(name: name, path: path, size: bytes.count, contents: contents, damage: contents.damage))
            } catch {
                segments.append(Segment(name: name, path: path, size: bytes.count, contents: nil, damage: error))
            }
        }
        return segments
    }

    /// What a repair cut.
    public struct Repair: Sendable {
        /// The segment cut at the first damage, and the offset it was cut at (nil: nothing was damaged).
        public var cut: (path: String, offset: Int)?
        /// Later segments removed (everything after the damage is dropped).
        public var removed: [String]
    }

    /// Cuts the log at its first damage on purpose: that segment is truncated at its last good
    /// batch (removed if its header is bad) and every later segment is deleted. Takes the
    /// directory's lock, so it refuses to run beside an engine.
    public static func repair(_ directory: String) throws(FanoutError) -> Repair {
        let lock: Int32
        do {
            lock = try FileIO.lockExclusively("\(directory)/LOCK")
        } catch {
            throw FanoutError(.unavailable, "cannot lock \(directory) (is fanout running on it?): \(error)")
        }
        defer { close(lock) }
        let segments = try Self.segments(in: directory)
        guard let first = segments.firstIndex(where: { $0.damage != nil }) else { return Repair(cut: nil, removed: []) }
        var repair = Repair(cut: nil, removed: [])
        do {
            if let contents = segments[first].contents {
                try FileIO.truncate(segments[first].path, to: contents.validLength)
                repair.cut = (segments[first].path, contents.validLength)
            } else {
                guard unlink(segments[first].path) == 0 else { throw FileIO.Error(operation: "unlink", path: segments[first].path, code: errno) }
                repair.removed.append(segments[first].path)
            }
            for segment in segments[(first + 1)...] {
                guard unlink(segment.path) == 0 else { throw FileIO.Error(operation: "unlink", path: segment.path, code: errno) }
                repair.removed.append(segment.path)
            }
            try FileIO.syncDirectory(directory)
        } catch {
            throw FanoutError(.unavailable, "repair failed: \(error)")
        }
        return repair
    }
}
