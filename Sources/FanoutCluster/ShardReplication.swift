package import FanoutCore

/// A shard's change log in its JetStream stream (docs/scale-out.md): the stream `fanout-shard-N`
/// on subject `fanout.shard.N`, one message per batch of records the owner logged together, in
/// the owner's order.
package struct ShardStream: Hashable, Sendable {
    package let shard: Int

    package init(shard: Int) {
        self.shard = shard
    }

    package var name: String { "fanout-shard-\(self.shard)" }
    package var subject: String { "fanout.shard.\(self.shard)" }

    /// The message id of the stream's first message, its creation marker (an empty batch).
    var creationMessageID: String { "\(self.name).created" }

    /// Creates the stream (file storage, `replicas` copies) and, while it is empty, appends its
    /// creation marker: an empty batch, which followers apply as nothing. Every owner's publish then
    /// names a last sequence of at least 1, which JetStream checks (libnats' expected last sequence
    /// of 0 means no check at all), so even a shard's first change is fenced against a deposed
    /// owner. Creating it again changes nothing (two creators at once store one marker: its message
    /// id is de-duplicated).
    /// A replicated stream answers only once its replicas have elected a leader: until then the
    /// calls are tried again (`JetStream.retrying`), for `patience` at most.
    package func create(on jetStream: JetStream, replicas: Int, patience: Duration = .seconds(30)) throws(FanoutError) {
        try JetStream.retrying(for: patience) { () throws(FanoutError) in
            try jetStream.addStream(self.name, subjects: [self.subject], replicas: replicas)
            guard try jetStream.state(of: self.name).lastSequence == 0 else { return }
            _ = try jetStream.publish(WALRecord.encodeBatch([]), to: self.subject, messageID: self.creationMessageID, expectedLastSequence: 0)
        }
    }

    /// Message `sequence`'s place in the shard's records: the term it was published under, the
    /// LSN after its last record and how many records it holds; nil for the creation marker.
    /// - Throws: `UNAVAILABLE` when the stream has no such message (purged meanwhile: read the
    ///   stream's state again), `INTERNAL` when its id is not a batch's.
    func batch(_ sequence: UInt64, on jetStream: JetStream) throws(FanoutError) -> (term: Substring, lsn: UInt64, records: UInt64)? {
        guard let message = try jetStream.storedMessage(sequence, of: self.name) else {
            throw FanoutError(.unavailable, "\(self.name) has no message \(sequence): the stream was purged meanwhile")
        }
        if message.messageID == self.creationMessageID { return nil }
        guard let id = message.messageID, let (term, lsn) = ShardPublisher.parse(id, stream: self) else {
            throw FanoutError(.internal, "message \(sequence) of \(self.name) has the id \(message.messageID ?? "(none)"), not a shard batch's")
        }
        let records = UInt64(try WALRecord.countOfBatch(message.data))
        guard records <= lsn else { throw FanoutError(.internal, "message \(sequence) of \(self.name) holds \(records) records ending at LSN \(lsn)") }
        return (term, lsn, records)
    }

    /// Where a log that ends at `lsn` goes on in the stream: after the returned sequence, that of
    /// the last message whose records all lie before `lsn`. The message after it holds record
    /// `lsn` (a snapshot's LSN may fall inside a batch: a follower seeded from it applies that
    /// batch's records from `lsn` on).
    /// - Throws: `FAILED_PRECONDITION` when the stream no longer holds the records from `lsn`
    ///   (it was purged past them: the log must start again from the shard's snapshot);
    ///   `INTERNAL` when `lsn` is past the stream's end (the log is not this stream's).
    package func resumption(after lsn: UInt64, on jetStream: JetStream) throws(FanoutError) -> UInt64 {
        try self.readingWhilePurged(on: jetStream) { (state) throws(FanoutError) in try self.resumption(after: lsn, in: state, on: jetStream) }
    }

    private func resumption(after lsn: UInt64, in state: JetStream.StreamState, on jetStream: JetStream) throws(FanoutError) -> UInt64 {
        func end(_ sequence: UInt64) throws(FanoutError) -> UInt64 { try self.batch(sequence, on: jetStream)?.lsn ?? 0 }
        let first = max(state.firstSequence, 1)
        if first > 1 {
            let start = try self.batch(first, on: jetStream).map { $0.lsn - $0.records } ?? 0
            guard start <= lsn else {
                throw FanoutError(.failedPrecondition, "\(self.name) was purged past LSN \(lsn) (it holds the records from LSN \(start) on): start from the shard's snapshot")
            }
        }
        // The last message ending at or before `lsn`: LSNs grow with the sequence.
        var low = first, high = state.lastSequence
        var found = first - 1
        var foundEnd: UInt64 = 0
        while low <= high {
            let middle = low + (high - low) / 2
            let after = try end(middle)
            if after <= lsn { (found, foundEnd) = (middle, after); low = middle + 1 } else { high = middle - 1 }
        }
        guard found < state.lastSequence || foundEnd == lsn else {
            throw FanoutError(.internal, "\(self.name) ends at LSN \(foundEnd), before LSN \(lsn) where this log ends: the log is not this stream's")
        }
        return found
    }

    /// Runs `body` with the stream's state, and again with its new state when a message it read
    /// was purged meanwhile (an owner purging while this node reads the stream back): a read
    /// that fails while the stream's first sequence stays put is NATS's failure, and is thrown.
    func readingWhilePurged<Result>(on jetStream: JetStream, _ body: (JetStream.StreamState) throws(FanoutError) -> Result) throws(FanoutError) -> Result {
        var state = try jetStream.state(of: self.name)
        for _ in 0..<8 {
            do {
                return try body(state)
            } catch where error.code == .unavailable {
                let now = try jetStream.state(of: self.name)
                guard now.firstSequence != state.firstSequence else { throw error }
                state = now
            }
        }
        return try body(state)
    }

    /// Purges the messages whose records all lie before `lsn` (a published snapshot holds them),
    /// but none from `keeping` on (the first message a follower still needs), and never the last
    /// message (its id carries the stream's last LSN). Returns the stream's first sequence now.
    package func purge(before lsn: UInt64, keeping: UInt64, on jetStream: JetStream) throws(FanoutError) -> UInt64 {
        let state = try jetStream.state(of: self.name)
        let first = min(try self.resumption(after: lsn, on: jetStream) + 1, keeping, state.lastSequence)
        guard first > state.firstSequence else { return state.firstSequence }
        try jetStream.purge(self.name, before: first)
        return first
    }
}

/// The owner's side: publishes each batch of records it logged, with the owner's term and the LSN
/// after the batch as the message id (a batch published twice, as after a retry, is stored once
/// while inside JetStream's duplicate window; another owner's batches, whose LSNs count from its
/// own log, never collide with these) and the stream's last sequence it knows as the expected one
/// (an owner deposed by another publisher is refused, and stops).
package final class ShardPublisher: @unchecked Sendable {
    package let jetStream: JetStream
    package let stream: ShardStream
    private let term: String
    /// The stream's last sequence as this publisher knows it; touched by one thread at a time.
    private var lastSequence: UInt64

    /// Starts publishing after the stream's current end.
    /// - Parameter term: names this ownership, `<node>.<number>` (the node and its lease's
    ///   revision, `node-a.17`): unique among the shard's owners.
    /// - Throws: `FAILED_PRECONDITION` when the stream is empty (made without `ShardStream.create`:
    ///   its first append could not be fenced), `UNAVAILABLE` when NATS does not answer.
    package init(_ jetStream: JetStream, stream: ShardStream, term: String) throws(FanoutError) {
        self.jetStream = jetStream
        self.stream = stream
        self.term = term
        self.lastSequence = try jetStream.state(of: stream.name).lastSequence
        guard self.lastSequence > 0 else {
            throw FanoutError(.failedPrecondition, "\(stream.name) is empty: a shard's stream starts with its creation marker (ShardStream.create)")
        }
    }

    /// The stream's last batch: the term it was published under and the LSN after it. Nil while
    /// the stream holds only its creation marker.
    /// - Throws: `INTERNAL` when the last message's id is not a shard batch's, `UNAVAILABLE` when
    ///   NATS does not answer.
    package func lastBatch() throws(FanoutError) -> (term: String, lsn: UInt64)? {
        try self.stream.batch(self.lastSequence, on: self.jetStream).map { (String($0.term), $0.lsn) }
    }

    /// Whether `term` is one of this publisher's node's (under this term or an earlier one).
    package func isOwnTerm(_ term: some StringProtocol) -> Bool {
        Self.node(of: term) == self.node
    }

    /// The node this publisher publishes for.
    package var node: String { String(Self.node(of: self.term)) }

    /// A batch's message id, `<stream>.<term>.<LSN after the batch>`, taken apart.
    static func parse(_ id: String, stream: ShardStream) -> (term: Substring, lsn: UInt64)? {
        let prefix = stream.name + "."
        guard id.hasPrefix(prefix) else { return nil }
        let rest = id.dropFirst(prefix.count)
        guard let dot = rest.lastIndex(of: ".") else { return nil }
        let term = rest[..<dot]
        guard !term.isEmpty, let lsn = UInt64(rest[rest.index(after: dot)...]) else { return nil }
        return (term, lsn)
    }

    /// The node a term names: the term up to its last dot (`node-a.17` is node-a's).
    static func node<S: StringProtocol>(of term: S) -> S.SubSequence {
        term.lastIndex(of: ".").map { term[..<$0] } ?? term[...]
    }

    /// Fences the shard for this publisher's term: appends an empty batch ending at `lsn`, only if
    /// the stream still ends at `sequence` (what the new owner applied through). From then on a
    /// previous owner still publishing is refused; until then, it could append changes (and answer
    /// them) that the new owner, which caught up before, would not hold.
    /// - Throws: `FAILED_PRECONDITION` when the stream moved past `sequence` (catch up, then fence
    ///   again), `UNAVAILABLE` when NATS does not answer.
    package func fence(through lsn: UInt64, after sequence: UInt64) throws(FanoutError) {
        let acknowledgement = try self.jetStream.publish(
            WALRecord.encodeBatch([]), to: self.stream.subject, messageID: "\(self.stream.name).\(self.term).\(lsn)", expectedLastSequence: sequence
        )
        self.lastSequence = max(self.lastSequence, acknowledgement.sequence)
    }

    /// Publishes one batch and waits until JetStream stored it; returns its stream sequence.
    /// - Parameter lsn: the log position after the batch's last record.
    /// - Throws: `FAILED_PRECONDITION` when another publisher appended (this owner is deposed),
    ///   `UNAVAILABLE` when NATS does not answer (publish the same batch again: it is stored once).
    @discardableResult
    package func publish(_ records: [WALRecord], through lsn: UInt64) throws(FanoutError) -> UInt64 {
        let acknowledgement = try self.jetStream.publish(
            WALRecord.encodeBatch(records),
            to: self.stream.subject,
            messageID: "\(self.stream.name).\(self.term).\(lsn)",
            expectedLastSequence: self.lastSequence
        )
        self.lastSequence = max(self.lastSequence, acknowledgement.sequence)
        return acknowledgement.sequence
    }
}

/// A follower's side: applies the shard's stream to its engine, message by message in stream
/// order, and remembers how far it got. It reads the stream through an ordered consumer
/// (`OrderedConsumer`), opened at the first catch-up after the last message applied.
package final class ShardFollower: @unchecked Sendable {
    private let jetStream: JetStream
    private let stream: ShardStream
    package let engine: Engine
    /// The last stream sequence applied; touched by one thread at a time.
    package private(set) var appliedSequence: UInt64
    /// Where it started: only the message after it can hold records its log already has.
    private let resumedAfter: UInt64
    private var consumer: OrderedConsumer?

    /// A follower of `stream` whose engine holds everything through `appliedSequence` (0: nothing).
    package init(_ jetStream: JetStream, stream: ShardStream, engine: Engine, appliedSequence: UInt64 = 0) {
        self.jetStream = jetStream
        self.stream = stream
        self.engine = engine
        self.appliedSequence = appliedSequence
        self.resumedAfter = appliedSequence
    }

    /// A follower whose engine is on its own data directory, started again (or seeded from the
    /// shard's snapshot): its log holds the stream's records in order (`Engine.applyReplicated`
    /// logs them), so it goes on from the message holding the record its log ends at.
    /// - Throws: `FAILED_PRECONDITION` when the stream was purged past where the log ends (start
    ///   from the shard's snapshot); `INTERNAL` when the log reaches past the stream's end (the
    ///   directory is not this stream's); `UNAVAILABLE` when NATS does not answer.
    package convenience init(_ jetStream: JetStream, stream: ShardStream, resuming engine: Engine) throws(FanoutError) {
        let through = engine.loggedThrough ?? 0
        self.init(jetStream, stream: stream, engine: engine, appliedSequence: try stream.resumption(after: through, on: jetStream))
    }

    /// Applies every message after `appliedSequence` up to the stream's end as it is now; returns
    /// how many records were applied.
    /// - Throws: `UNAVAILABLE` when NATS does not answer, or the messages up to that end do not
    ///   come within `patience`; `INTERNAL` when a message does not decode or apply;
    ///   `FAILED_PRECONDITION` when the stream has a gap (purged past what this follower
    ///   applied): it then starts again from the shard's snapshot.
    @discardableResult
    package func catchUp(patience: Duration = .seconds(10)) throws(FanoutError) -> Int {
        let end = try self.jetStream.state(of: self.stream.name).lastSequence
        let deadline = ContinuousClock.now + patience
        var applied = 0
        while self.appliedSequence < end {
            let left = deadline - ContinuousClock.now
            guard left > .zero, let message = try self.reader().next(waiting: left) else {
                throw FanoutError(.unavailable, "\(self.stream.name) did not deliver its messages up to \(end) within \(patience)")
            }
            applied += try self.apply(message)
        }
        return applied
    }

    /// Applies at most `limit` of the messages the stream has delivered already, without waiting
    /// for more: how many records that was, and whether none is left waiting.
    /// - Throws: as `catchUp()`.
    package func catchUp(atMost limit: Int) throws(FanoutError) -> (records: Int, reachedEnd: Bool) {
        var applied = 0
        for _ in 0..<limit {
            guard let message = try self.reader().next() else { return (applied, true) }
            applied += try self.apply(message)
        }
        return (applied, false)
    }

    /// Stops reading the stream (an owner-to-be that applied it to its end).
    package func stopReading() {
        self.consumer = nil
    }

    /// The ordered consumer, from the message after the last applied.
    private func reader() throws(FanoutError) -> OrderedConsumer {
        if let consumer = self.consumer { return consumer }
        let consumer = try OrderedConsumer(self.jetStream, stream: self.stream.name, subject: self.stream.subject, from: self.appliedSequence + 1)
        self.consumer = consumer
        return consumer
    }

    /// Applies one message; returns how many records it applied. A follower on a data directory
    /// applies only the records from where its log ends (the first message after a snapshot's
    /// LSN may hold records the snapshot has; after that one, every message starts where the log
    /// ends).
    private func apply(_ message: OrderedConsumer.Message) throws(FanoutError) -> Int {
        // Already applied (a consumer made again from an earlier point): nothing to do.
        guard message.sequence > self.appliedSequence else { return 0 }
        guard message.sequence == self.appliedSequence + 1 else {
            self.consumer = nil
            throw FanoutError(.failedPrecondition, "\(self.stream.name) has no message \(self.appliedSequence + 1): the stream was purged past this follower")
        }
        var records = try WALRecord.decodeBatch(message.data)[...]
        if message.sequence == self.resumedAfter + 1, let through = self.engine.loggedThrough, let id = message.messageID,
            let (_, end) = ShardPublisher.parse(id, stream: self.stream)
        {
            let start = end - min(end, UInt64(records.count))
            guard start <= through else {
                throw FanoutError(.internal, "message \(message.sequence) of \(self.stream.name) starts at LSN \(start), past LSN \(through) where this follower's log ends")
            }
            records = records.dropFirst(Int(min(through - start, UInt64(records.count))))
        }
        try self.engine.applyReplicated(Array(records))
        self.appliedSequence = message.sequence
        return records.count
    }
}
