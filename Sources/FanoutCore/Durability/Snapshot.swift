#if canImport(Glibc)
import Glibc
#endif

/// Snapshot files: the whole state as records that rebuild it, in one LZ4 frame.
///
/// ```
/// snapshot-<LSN, 16 hex digits>.lz4 = LZ4 frame (content checksum on) of:
///   magic "FANOUTSN" | u16 version | u16 0 | u64 LSN | u64 record count | records (u32 length | record)
/// ```
/// Everything before `LSN` in the log is in the snapshot; recovery replays the log from `LSN`.
enum Snapshot {
    static let magic: [UInt8] = Array("FANOUTSN".utf8)
    static let version: UInt16 = 1
    static let prefix = "snapshot-"
    static let suffix = ".lz4"
    /// The largest snapshot content recovery will expand (a guard against a hostile file).
    static let maximumSize = 1 << 36

    static func fileName(lsn: UInt64) -> String {
        let hex = String(lsn, radix: 16)
        return Self.prefix + String(repeating: "0", count: max(0, 16 - hex.count)) + hex + Self.suffix
    }

    /// The LSN in a snapshot file's name, if it is one.
    static func lsn(ofFileName name: String) -> UInt64? {
        guard name.hasPrefix(Self.prefix), name.hasSuffix(Self.suffix) else { return nil }
        return UInt64(name.dropFirst(Self.prefix.count).dropLast(Self.suffix.count), radix: 16)
    }

    /// Writes the snapshot of `projects` at `lsn`: to a temporary name, synced, renamed, and the
    /// directory synced. Returns the file's path.
    static func write(_ projects: [ProjectState], lsn: UInt64, directory: String) throws -> String {
        let path = "\(directory)/\(Self.fileName(lsn: lsn))"
        let temporary = path + ".tmp"
        let descriptor = try FileIO.open(temporary, O_WRONLY | O_CREAT | O_TRUNC)
        var closed = false
        defer { if !closed { close(descriptor) } }

        // Project records first (the default project always exists), then each project's state.
        var pending: [[WALRecord]] = [projects.filter { $0.id != .default }.map { WALRecord.createProject($0.id) }]
        pending += projects.map { $0.snapshotRecords() }
        let count = pending.reduce(0) { $0 + $1.count }
        var header = BinaryWriter(capacity: 28)
        header.append(Self.magic)
        header.write(Self.version)
        header.write(UInt16(0))
        header.write(lsn)
        header.write(UInt64(count))
        var chunks: [[UInt8]] = [header.bytes]
        var next = 0
        try LZ4Frame.compress({
            if !chunks.isEmpty { return chunks.removeFirst() }
            while next < pending.count {
                let records = pending[next]
                next += 1
                var writer = BinaryWriter(capacity: 1 << 16)
                for record in records {
                    let lengthOffset = writer.bytes.count
                    writer.write(UInt32(0))
                    record.encode(into: &writer)
                    writer.set(UInt32(writer.bytes.count - lengthOffset - 4), at: lengthOffset)
                    if writer.bytes.count > 1 << 20 {
                        chunks.append(writer.bytes)
                        writer = BinaryWriter(capacity: 1 << 16)
                    }
                }
                chunks.append(writer.bytes)
                return chunks.removeFirst()
            }
            return nil
        }, into: { bytes in try FileIO.writeAll(descriptor, bytes, path: temporary) })
        try FileIO.dataSync(descriptor, path: temporary)
        close(descriptor)
        closed = true
        try FileIO.rename(temporary, path)
        try FileIO.syncDirectory(directory)
        return path
    }

    /// Reads a snapshot file: its LSN and records. Throws on anything but a complete, valid file.
    static func read(_ path: String) throws -> (lsn: UInt64, records: [WALRecord]) {
        let content = try LZ4Frame.decompress(try FileIO.readAll(path), limit: Self.maximumSize)
        var reader = BinaryReader(content)
        guard content.count >= 28, Array(content[0..<8]) == Self.magic else {
            throw WALDamage(offset: 0, reason: "not a fanout snapshot (bad magic)")
        }
        _ = try reader.readBytes(8)
        let version = try reader.read(UInt16.self)
        guard version == Self.version else { throw WALDamage(offset: 8, reason: "snapshot version \(version) is not supported") }
        _ = try reader.read(UInt16.self)
        let lsn = try reader.read(UInt64.self)
        let count = try reader.read(UInt64.self)
        var records: [WALRecord] = []
        while reader.remaining > 0 {
            let length = Int(try reader.read(UInt32.self))
            let start = reader.position
            _ = try reader.readBytes(length)
            var recordReader = BinaryReader(content, from: start, to: start + length)
            records.append(try WALRecord.decode(from: &recordReader))
        }
        guard UInt64(records.count) == count else {
            throw WALDamage(offset: reader.position, reason: "the snapshot holds \(records.count) records, its header says \(count)")
        }
        return (lsn, records)
    }
}
