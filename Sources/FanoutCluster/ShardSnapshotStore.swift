package import FanoutCore

/// The shards' published snapshots (docs/scale-out.md, "Snapshots and purging"): where a node
/// whose directory is behind its shard's purged stream, or a new node, starts from.
///
/// One stream, `fanout-snapshots`, holds them: a snapshot of shard N is the bytes of an owner's
/// snapshot file (`snapshot-<LSN>.lz4`), cut into chunks of at most 512 KiB (under NATS's 1 MB
/// default message size) published in order on `fanout.snapshot.N.<term>`. The entry
/// `snapshot.N` in the cluster's layout bucket names the newest whole one (`Entry`), written with
/// compare-and-set once every chunk is stored; only then are the shard's older chunks purged.
package final class ShardSnapshotStore: @unchecked Sendable {
    // Safe to share: it holds only libnats handles, which are thread-safe.
    static let streamName = "fanout-snapshots"
    static let chunkSize = 512 << 10

    /// Where a published snapshot is, as its entry in the layout bucket says: one line,
    /// `<LSN> <subject> <first chunk's sequence> <chunks> <bytes> <CRC32C>`.
    package struct Entry: Hashable, Sendable {
        /// The snapshot holds the shard's records before this LSN.
        package var lsn: UInt64
        package var subject: String
        package var firstSequence: UInt64
        package var chunks: Int
        package var bytes: Int
        package var checksum: UInt32

        var encoded: [UInt8] {
            Array("\(self.lsn) \(self.subject) \(self.firstSequence) \(self.chunks) \(self.bytes) \(self.checksum)".utf8)
        }

        init(lsn: UInt64, subject: String, firstSequence: UInt64, chunks: Int, bytes: Int, checksum: UInt32) {
            (self.lsn, self.subject, self.firstSequence, self.chunks, self.bytes, self.checksum) = (lsn, subject, firstSequence, chunks, bytes, checksum)
        }

        init?(decoding value: [UInt8]) {
            let fields = String(decoding: value, as: UTF8.self).split(separator: " ")
            guard fields.count == 6, let lsn = UInt64(fields[0]), let first = UInt64(fields[2]), let chunks = Int(fields[3]),
                let bytes = Int(fields[4]), let checksum = UInt32(fields[5]), chunks > 0, bytes >= 0
            else { return nil }
            self.init(lsn: lsn, subject: String(fields[1]), firstSequence: first, chunks: chunks, bytes: bytes, checksum: checksum)
        }
    }

    private let jetStream: JetStream
    private let layout: KeyValueBucket

    /// The store of the cluster whose layout bucket is `layout`; makes its stream (with
    /// `replicas` copies) when it is missing.
    package init(_ jetStream: JetStream, layout: KeyValueBucket, replicas: Int) throws(FanoutError) {
        try jetStream.addStream(Self.streamName, subjects: ["fanout.snapshot.>"], replicas: replicas)
        self.jetStream = jetStream
        self.layout = layout
    }

    static func key(_ shard: Int) -> String { "snapshot.\(shard)" }

    /// The newest snapshot published of `shard`; nil when none was.
    /// - Throws: `INTERNAL` when the entry does not parse, `UNAVAILABLE` when NATS does not answer.
    package func latest(of shard: Int) throws(FanoutError) -> Entry? {
        try self.read(shard)?.entry
    }

    private func read(_ shard: Int) throws(FanoutError) -> (entry: Entry, revision: UInt64)? {
        guard let stored = try self.layout.entry(Self.key(shard)) else { return nil }
        guard let entry = Entry(decoding: stored.value) else {
            throw FanoutError(.internal, "the entry \(Self.key(shard)) in \(self.layout.name) does not name a snapshot")
        }
        return (entry, stored.revision)
    }

    /// Publishes the snapshot file at `path`, which holds `shard`'s records before `lsn`, as the
    /// shard's newest (unless one at least as new is published already: that one is kept), then
    /// purges the shard's older chunks. Returns the entry naming the shard's newest snapshot now.
    /// - Parameter term: the publishing owner's term (its chunks' subject ends with it, so two
    ///   publishers' chunks never interleave).
    /// - Throws: `UNAVAILABLE` when the file cannot be read or NATS does not answer.
    @discardableResult
    package func publish(shard: Int, term: String, path: String, lsn: UInt64) throws(FanoutError) -> Entry {
        let current = try self.read(shard)
        if let current, current.entry.lsn >= lsn { return current.entry }
        let subject = "fanout.snapshot.\(shard).\(term)"
        var first: UInt64 = 0
        var (chunks, bytes, checksum): (Int, Int, UInt32) = (0, 0, 0)
        // A chunk at a time: only one is in memory. An empty file is one empty chunk.
        func unreadable(_ error: FileIO.Error) -> FanoutError {
            FanoutError(.unavailable, "cannot read the snapshot \(path) to publish it: \(error)")
        }
        let file: FileIO.PieceReader
        do { file = try FileIO.PieceReader(path) } catch { throw unreadable(error) }
        while true {
            let chunk: [UInt8]
            do { chunk = try file.next(Self.chunkSize) } catch { throw unreadable(error) }
            if chunk.isEmpty && chunks > 0 { break }
            // A chunk published again (a retry) is stored once, at its first sequence.
            let stored = try self.jetStream.publish(chunk, to: subject, messageID: Self.chunkID(subject, lsn: lsn, chunk: chunks), expectedLastSequence: 0)
            if chunks == 0 { first = stored.sequence }
            (chunks, bytes, checksum) = (chunks + 1, bytes + chunk.count, CRC32C.checksum(chunk, continuing: checksum))
            if chunk.count < Self.chunkSize { break }
        }
        let entry = Entry(lsn: lsn, subject: subject, firstSequence: first, chunks: chunks, bytes: bytes, checksum: checksum)
        let written: UInt64?
        if let current {
            written = try self.layout.update(Self.key(shard), entry.encoded, at: current.revision)
        } else {
            written = try self.layout.create(Self.key(shard), entry.encoded)
        }
        guard written != nil else {
            // Another publisher wrote the entry meanwhile: its snapshot stands, these chunks go
            // with the next purge.
            return try self.latest(of: shard) ?? entry
        }
        try self.jetStream.purge(Self.streamName, subject: "fanout.snapshot.\(shard).>", before: first)
        return entry
    }

    /// Writes the snapshot `entry` names to a new file at `path`, a chunk at a time, every chunk
    /// checked (its id, then the whole against the entry's length and CRC32C), and syncs it; on
    /// failure no file is left there.
    /// - Throws: `UNAVAILABLE` when a chunk does not come within `patience` or is gone (a newer
    ///   snapshot's publish purged it: read the newest entry again) or the file cannot be written,
    ///   `INTERNAL` when the bytes do not match the entry.
    package func download(_ entry: Entry, to path: String, patience: Duration = .seconds(30)) throws(FanoutError) {
        let consumer = try OrderedConsumer(self.jetStream, stream: Self.streamName, subject: entry.subject, from: entry.firstSequence)
        let deadline = ContinuousClock.now + patience
        let file: FileIO.PieceWriter
        do {
            file = try FileIO.PieceWriter(path)
        } catch {
            throw FanoutError(.unavailable, "cannot write the snapshot to \(path): \(error)")
        }
        var (bytes, checksum): (Int, UInt32) = (0, 0)
        for chunk in 0..<entry.chunks {
            let left = deadline - ContinuousClock.now
            guard left > .zero, let message = try consumer.next(waiting: left) else {
                throw FanoutError(.unavailable, "the snapshot on \(entry.subject) did not come within \(patience)")
            }
            guard message.messageID == Self.chunkID(entry.subject, lsn: entry.lsn, chunk: chunk) else {
                throw FanoutError(.unavailable, "chunk \(chunk) of the snapshot at LSN \(entry.lsn) on \(entry.subject) is gone: a newer snapshot replaced it")
            }
            do {
                try file.write(message.data)
            } catch {
                throw FanoutError(.unavailable, "cannot write the snapshot to \(path): \(error)")
            }
            (bytes, checksum) = (bytes + message.data.count, CRC32C.checksum(message.data, continuing: checksum))
        }
        guard bytes == entry.bytes, checksum == entry.checksum else {
            throw FanoutError(.internal, "the snapshot at LSN \(entry.lsn) on \(entry.subject) is \(bytes) bytes that do not match its entry (\(entry.bytes) bytes and their checksum)")
        }
        do {
            try file.finish()
        } catch {
            throw FanoutError(.unavailable, "cannot write the snapshot to \(path): \(error)")
        }
    }

    private static func chunkID(_ subject: String, lsn: UInt64, chunk: Int) -> String {
        "\(subject).\(lsn).\(chunk)"
    }
}
