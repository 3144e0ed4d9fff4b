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
        let bytes: [UInt8]
        do {
            bytes = try FileIO.readAll(path)
        } catch {
            throw FanoutError(.unavailable, "cannot read the snapshot \(path) to publish it: \(error)")
        }
        let subject = "fanout.snapshot.\(shard).\(term)"
        var first: UInt64 = 0
        var chunks = 0
        for start in stride(from: 0, to: max(bytes.count, 1), by: Self.chunkSize) {
            let chunk = Array(bytes[start..<min(start + Self.chunkSize, bytes.count)])
            // A chunk published again (a retry) is stored once, at its first sequence.
            let stored = try self.jetStream.publish(chunk, to: subject, messageID: Self.chunkID(subject, lsn: lsn, chunk: chunks), expectedLastSequence: 0)
            if chunks == 0 { first = stored.sequence }
            chunks += 1
        }
        let entry = Entry(lsn: lsn, subject: subject, firstSequence: first, chunks: chunks, bytes: bytes.count, checksum: CRC32C.checksum(bytes))
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

    /// The bytes of the snapshot `entry` names, every chunk checked (its id, then the whole
    /// against the entry's length and CRC32C).
    /// - Throws: `UNAVAILABLE` when a chunk does not come within `patience` or is gone (a newer
    ///   snapshot's publish purged it: read the newest entry again), `INTERNAL` when the bytes do
    ///   not match the entry.
    package func download(_ entry: Entry, patience: Duration = .seconds(30)) throws(FanoutError) -> [UInt8] {
        let consumer = try OrderedConsumer(self.jetStream, stream: Self.streamName, subject: entry.subject, from: entry.firstSequence)
        let deadline = ContinuousClock.now + patience
        var bytes: [UInt8] = []
        bytes.reserveCapacity(entry.bytes)
        for chunk in 0..<entry.chunks {
            let left = deadline - ContinuousClock.now
            guard left > .zero, let message = try consumer.next(waiting: left) else {
                throw FanoutError(.unavailable, "the snapshot on \(entry.subject) did not come within \(patience)")
            }
            guard message.messageID == Self.chunkID(entry.subject, lsn: entry.lsn, chunk: chunk) else {
                throw FanoutError(.unavailable, "chunk \(chunk) of the snapshot at LSN \(entry.lsn) on \(entry.subject) is gone: a newer snapshot replaced it")
            }
            bytes += message.data
        }
        guard bytes.count == entry.bytes, CRC32C.checksum(bytes) == entry.checksum else {
            throw FanoutError(.internal, "the snapshot at LSN \(entry.lsn) on \(entry.subject) is \(bytes.count) bytes that do not match its entry (\(entry.bytes) bytes and their checksum)")
        }
        return bytes
    }

    private static func chunkID(_ subject: String, lsn: UInt64, chunk: Int) -> String {
        "\(subject).\(lsn).\(chunk)"
    }
}
