package import FanoutCore

/// A node's data directory against its shard's stream (docs/scale-out.md): every node's log holds
/// the shard's records in the stream's order, its own batches and those it applied as a follower,
/// so from the last batch the node published on, its log must hold the stream's records (a
/// follower's may stop short of the stream's end). A deposed owner's log, with changes the stream
/// never got, does not, even where the LSNs agree.
package enum ShardLog {
    /// The last batch `node` published in `stream` (as of `state`): its sequence and the LSN after
    /// it; nil when it published none. Reads back from the stream's end, a message at a time.
    /// - Throws: `FAILED_PRECONDITION` when the stream was purged and what it still holds has no
    ///   batch of `node`'s (its last batch may be among the purged ones: the check cannot be made).
    private static func lastBatch(of node: String, in stream: ShardStream, state: JetStream.StreamState, _ jetStream: JetStream) throws(FanoutError) -> (sequence: UInt64, lsn: UInt64)? {
        var sequence = state.lastSequence
        while sequence >= max(state.firstSequence, 1) {
            if let batch = try stream.batch(sequence, on: jetStream), ShardPublisher.node(of: batch.term) == node { return (sequence, batch.lsn) }
            sequence -= 1
        }
        guard state.firstSequence <= 1 else {
            throw FanoutError(.failedPrecondition, "\(stream.name) was purged before sequence \(state.firstSequence), and \(node)'s last batch is not after it: its log cannot be checked against the stream")
        }
        return nil
    }

    /// The records of every message of `stream` after `sequence`, in order.
    private static func records(after sequence: UInt64, in stream: ShardStream, state: JetStream.StreamState, _ jetStream: JetStream) throws(FanoutError) -> [WALRecord] {
        let last = state.lastSequence
        var records: [WALRecord] = []
        var next = sequence + 1
        while next <= last {
            guard let message = try jetStream.storedMessage(next, of: stream.name) else {
                throw FanoutError(.unavailable, "\(stream.name) has no message \(next): the stream was purged meanwhile")
            }
            records += try WALRecord.decodeBatch(message.data)
            next += 1
        }
        return records
    }

    /// The check `node`'s directory must pass at start (`Engine(directory:check:)`): its records
    /// from its own last batch on must be the stream's, all of them (`exactly`: to own the shard)
    /// or the first of them (to follow it).
    /// - Throws: `FAILED_PRECONDITION` when the stream no longer holds what the check needs.
    package static func check(directory: String, against stream: ShardStream, _ jetStream: JetStream, node: String, exactly: Bool) throws(FanoutError) -> Engine.LogCheck {
        let (own, expected) = try stream.readingWhilePurged(on: jetStream) { (state) throws(FanoutError) in
            let own = try Self.lastBatch(of: node, in: stream, state: state, jetStream)
            return (own, try Self.records(after: own?.sequence ?? 0, in: stream, state: state, jetStream))
        }
        let from = own?.lsn ?? 0
        return Engine.LogCheck(from: from) { (logged: [WALRecord]) throws(FanoutError) in
            let matches = exactly ? logged == expected : logged.count <= expected.count && logged[...] == expected.prefix(logged.count)
            guard matches else {
                throw FanoutError(
                    .failedPrecondition,
                    "the log in \(directory) is not \(stream.name)'s after LSN \(from) (\(logged.count) records against the stream's \(expected.count)): it holds changes the stream never got, so this node must be rebuilt from the stream"
                )
            }
        }
    }
}
