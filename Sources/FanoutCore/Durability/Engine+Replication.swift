/// The engine's side of replication (issue 22, docs/scale-out.md): an owner's logged records leave
/// as batches, and a follower applies them in the owner's order, through the same transitions
/// recovery replays, so that it holds the same state (the same slots, message sequences and
/// mailboxes) as the owner had at that point.
extension WALRecord {
    /// Records as one replication message: `u32 count`, then per record `u32 length` and the log's
    /// own encoding of it (docs/wal-format.md).
    package static func encodeBatch(_ records: [WALRecord]) -> [UInt8] {
        var batch = BinaryWriter(capacity: 64 * records.count + 4)
        batch.write(UInt32(records.count))
        for record in records {
            let lengthAt = batch.bytes.count
            batch.write(UInt32(0))
            record.encode(into: &batch)
            batch.set(UInt32(batch.bytes.count - lengthAt - 4), at: lengthAt)
        }
        return batch.bytes
    }

    /// How many records a replication message holds, read from its head alone.
    /// - Throws: `INTERNAL` when it is too short to be a batch.
    package static func countOfBatch(_ bytes: [UInt8]) throws(FanoutError) -> Int {
        var reader = BinaryReader(bytes)
        do {
            return Int(try reader.read(UInt32.self))
        } catch {
            throw FanoutError(.internal, "a replicated batch does not decode: \(error)")
        }
    }

    /// The records of a replication message. - Throws: `INTERNAL` naming the record that does not
    /// decode (a message that is not a batch, cut short, or from a newer format).
    package static func decodeBatch(_ bytes: [UInt8]) throws(FanoutError) -> [WALRecord] {
        var reader = BinaryReader(bytes)
        do {
            let count = Int(try reader.read(UInt32.self))
            guard count <= reader.remaining / 4 else { throw BinaryReader.Error(offset: 0, reason: "a count of \(count) records in \(bytes.count) bytes") }
            var records: [WALRecord] = []
            records.reserveCapacity(count)
            for index in 0..<count {
                let length = Int(try reader.read(UInt32.self))
                let start = bytes.count - reader.remaining
                _ = try reader.readBytes(length)
                var one = BinaryReader(bytes, from: start, to: start + length)
                let record = try WALRecord.decode(from: &one)
                guard one.remaining == 0 else { throw BinaryReader.Error(offset: start, reason: "record \(index) has \(one.remaining) bytes left over") }
                records.append(record)
            }
            guard reader.remaining == 0 else { throw BinaryReader.Error(offset: bytes.count - reader.remaining, reason: "bytes after the last record") }
            return records
        } catch {
            throw FanoutError(.internal, "a replicated batch does not decode: \(error)")
        }
    }
}

extension Engine {
    /// Applies records another engine logged, in its order, as recovery replays them: this
    /// engine (a follower) then holds the owner's state. Each record is applied whole or not at
    /// all. A follower on a data directory also appends them to its own log, in one append: its
    /// log then holds the stream's records in the stream's order, so its LSN after a message is
    /// the LSN the owner published that message with (`ShardFollower` resumes from it).
    /// - Throws: `INTERNAL` when a record does not apply (the stream disagrees with this state:
    ///   a gap, or records applied twice); the records before it stay applied (and logged).
    ///   `UNAVAILABLE` when the follower's own log refuses them.
    package func applyReplicated(_ records: [WALRecord]) throws(FanoutError) {
        var applied = 0
        var refusal: FanoutError?
        for record in records {
            do throws(FanoutError) {
                try self.applyReplicatedRecord(record)
            } catch {
                refusal = error
                break
            }
            applied += 1
        }
        // Logged once applied: should the log fail, the state is rebuilt from what it holds.
        if applied > 0, let log = self.log {
            _ = try log.appendReplicated(applied == records.count ? records : Array(records[..<applied]))
        }
        if let refusal { throw refusal }
    }

    /// The LSN a snapshot file covers (everything before it), from its path; nil when the path
    /// does not name a snapshot (`snapshot()` returns such paths).
    package static func lsn(ofSnapshot path: String) -> UInt64? {
        Snapshot.lsn(ofFileName: String(path.split(separator: "/").last ?? ""))
    }

    /// Makes `directory` (missing or empty) start at `lsn` from the snapshot file at `snapshot`
    /// (another node's, as published, written and synced on the same file system), which it moves
    /// in: an engine opened on it recovers the snapshot's state and logs on from `lsn` (a follower
    /// seeded from its shard's snapshot). The move and the manifest naming the file are durable.
    /// - Throws: `UNAVAILABLE` when the files cannot be moved or written.
    package static func seed(directory: String, snapshot: String, lsn: UInt64) throws(FanoutError) {
        do throws(FileIO.Error) {
            try FileIO.makeDirectory(directory)
            try FileIO.rename(snapshot, "\(directory)/\(Snapshot.fileName(lsn: lsn))")
            try FileIO.syncDirectory(directory)
            try WALManifest(segments: [], snapshots: [lsn]).write(directory: directory)
        } catch {
            throw FanoutError(.unavailable, "cannot seed \(directory) with a snapshot: \(error)")
        }
    }

    /// The LSN after the last record this engine logged (nil for an in-memory engine): for a
    /// follower on its data directory, how far into its shard's stream its log reaches.
    package var loggedThrough: UInt64? { self.log?.nextRecordLSN.lsn }

    private func applyReplicatedRecord(_ record: WALRecord) throws(FanoutError) {
        switch record {
        case .createProject(let id):
            let configuration = self.configuration
            try self.projects.withLock { (projects: inout [ProjectID: ProjectBox]) throws(FanoutError) in
                guard projects[id] == nil else { throw FanoutError(.internal, "replicated: project \(id) created twice") }
                projects[id] = ProjectBox(ProjectState(id: id, configuration: configuration))
            }
        case .deleteProject(let id):
            try self.projects.withLock { (projects: inout [ProjectID: ProjectBox]) throws(FanoutError) in
                guard let box = projects.removeValue(forKey: id) else { throw FanoutError(.internal, "replicated: unknown project \(id) deleted") }
                box.state.withLock { $0.finishConsumers() }
            }
        default:
            try self.withProject(record.project) { (state: inout ProjectState) throws(FanoutError) in try state.replay(record) }
        }
    }
}
