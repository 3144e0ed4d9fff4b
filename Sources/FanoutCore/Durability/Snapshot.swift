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
        do {
            try Self.write(projects, lsn: lsn, to: temporary)
            try FileIO.rename(temporary, path)
        } catch {
            _ = unlink(temporary)  // a failed snapshot leaves nothing behind
            throw error
        }
        try FileIO.syncDirectory(directory)
        return path
    }

    /// Writes and syncs the snapshot file's bytes to `temporary`.
    private static func write(_ projects: [ProjectState], lsn: UInt64, to temporary: String) throws {
        let descriptor = try FileIO.open(temporary, O_WRONLY | O_CREAT | O_TRUNC)
        var closed = false
        defer { if !closed { close(descriptor) } }

        // Project records first (the default project always exists), then each project's state,
        // its records made as the content is written (`SnapshotRecords`), counted ahead for the header.
        var creations = projects.filter { $0.id != .default }.map { WALRecord.createProject($0.id) }[...]
        var states = projects.map(SnapshotRecords.init)[...]
        let count = creations.count + states.reduce(0) { $0 + $1.count }
        var written = 0
        // The content goes to the compressor about a MiB at a time, each piece written into the
        // same buffer (a fresh one for each piece grew from 64 KiB by doubling, every step into
        // memory never touched: page faults, a sixth of a 1M x 20 snapshot's samples). The
        // compressor lets go of a piece before asking for the next.
        var writer = BinaryWriter(capacity: 1 << 21)
        writer.append(Self.magic)
        writer.write(Self.version)
        writer.write(UInt16(0))
        writer.write(lsn)
        writer.write(UInt64(count))
        var isFirst = true
        try LZ4Frame.compress({
            if isFirst {
                isFirst = false
            } else {
                writer.removeAll()
            }
            while let record = creations.popFirst() ?? Self.next(of: &states) {
                writer.writeLengthPrefixed { record.encode(into: &$0) }
                written += 1
                if writer.bytes.count > 1 << 20 { return writer.bytes }
            }
            return writer.bytes.isEmpty ? nil : writer.bytes
        }, into: { bytes in try FileIO.writeAll(descriptor, bytes, path: temporary) })
        // The header promised `count` records: a snapshot that holds another number is not kept.
        guard written == count else { throw SnapshotCountMismatch(promised: count, written: written) }
        try FileIO.dataSync(descriptor, path: temporary)
        close(descriptor)
        closed = true
    }

    /// The next record of the first project that has one left.
    private static func next(of states: inout ArraySlice<SnapshotRecords>) -> WALRecord? {
        while !states.isEmpty {
            if let record = states[states.startIndex].next() { return record }
            states.removeFirst()
        }
        return nil
    }

    /// The records counted for a snapshot's header and those its projects then gave differ.
    struct SnapshotCountMismatch: Error, CustomStringConvertible {
        let promised: Int
        let written: Int
        var description: String { "the snapshot's header counted \(self.promised) records, its projects gave \(self.written)" }
    }

    /// Reads a snapshot file and hands its records to `apply` in order, decoding them on a thread
    /// of its own while `apply` runs. Returns the snapshot's LSN and record count. Throws on
    /// anything but a complete, valid file; the caller discards what it applied before the error.
    static func read(_ path: String, apply: (WALRecord) throws -> Void) throws -> (lsn: UInt64, records: Int) {
        let decoder = ProducerThread<Chunk, any Error>(capacity: 8) { emit in try Self.decode(path, emit: emit) }
        defer { decoder.stop() }
        var lsn: UInt64? = nil
        var count = 0
        while let chunk = try decoder.next() {
            switch chunk {
            case .header(let snapshotLSN):
                lsn = snapshotLSN
            case .records(let records):
                for record in records { try apply(record) }
                count += records.count
            }
        }
        guard let lsn else { throw WALDamage(offset: 0, reason: "the snapshot has no header") }
        return (lsn, count)
    }

    /// What the decoding thread hands over: the header's LSN first, then records in batches.
    private enum Chunk {
        case header(lsn: UInt64)
        case records([WALRecord])
    }

    private static let batchSize = 4096

    /// The largest record a snapshot may hold (a topic of 268M subscribers), so that a damaged
    /// length cannot make the reader buffer the rest of the file.
    private static let maximumRecordSize = 1 << 30

    /// Expands the file a piece at a time and decodes its records as they arrive.
    private static func decode(_ path: String, emit: (Chunk) -> Bool) throws {
        let content = try LZ4Frame.Decompressor(reading: path, limit: Self.maximumSize)
        var buffer: [UInt8] = []
        var position = 0
        var bufferOffset = 0  // the content offset of buffer[0], for error messages
        /// Makes `count` bytes available at `position`; `false` if the content ends first.
        func fill(_ count: Int) throws -> Bool {
            while buffer.count - position < count {
                guard let piece = try content.next() else { return false }
                buffer.removeSubrange(0..<position)
                bufferOffset += position
                position = 0
                buffer.append(contentsOf: piece)
            }
            return true
        }

        guard try fill(28), Array(buffer[0..<8]) == Self.magic else {
            throw WALDamage(offset: 0, reason: "not a fanout snapshot (bad magic)")
        }
        var header = BinaryReader(buffer, from: 8, to: 28)
        let version = try header.read(UInt16.self)
        guard version == Self.version else { throw WALDamage(offset: 8, reason: "snapshot version \(version) is not supported") }
        _ = try header.read(UInt16.self)
        guard emit(.header(lsn: try header.read(UInt64.self))) else { return }
        let count = try header.read(UInt64.self)
        position = 28

        var decoded = 0
        var batch: [WALRecord] = []
        batch.reserveCapacity(Self.batchSize)
        while try fill(1) {
            guard try fill(4) else { throw WALDamage(offset: bufferOffset + position, reason: "truncated record length") }
            var lengthReader = BinaryReader(buffer, from: position, to: position + 4)
            let length = Int(try lengthReader.read(UInt32.self))
            guard length <= Self.maximumRecordSize else {
                throw WALDamage(offset: bufferOffset + position, reason: "a record of \(length) bytes, over the limit")
            }
            guard try fill(4 + length) else { throw WALDamage(offset: bufferOffset + position, reason: "truncated record") }
            var recordReader = BinaryReader(buffer, from: position + 4, to: position + 4 + length)
            batch.append(try WALRecord.decode(from: &recordReader))
            position += 4 + length
            decoded += 1
            if batch.count == Self.batchSize {
                guard emit(.records(batch)) else { return }
                batch.removeAll(keepingCapacity: true)
            }
        }
        guard UInt64(decoded) == count else {
            throw WALDamage(offset: bufferOffset + position, reason: "the snapshot holds \(decoded) records, its header says \(count)")
        }
        _ = emit(.records(batch))
    }
}
