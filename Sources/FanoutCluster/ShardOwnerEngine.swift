package import FanoutCore
package import FanoutModel

extension Engine {
    /// A shard owner's engine (docs/scale-out.md): opened on its data directory, logging through a
    /// `ReplicatedChangeLog` that publishes each run of durable records with `publisher`, so that a
    /// change is answered once the local log and the shard's stream both hold it.
    ///
    /// The stream's last batch says how far its publisher's log reached (its message id carries
    /// the LSN after it; every node's log holds the shard's records in the stream's order, so LSNs
    /// mean the same on every node). When this node published it, what the directory's log holds
    /// beyond (synced, then a crash before the publish) is published first, under `publisher`'s
    /// term, before anything is acknowledged. When another node did (this node followed, and now
    /// takes over), the directory's log must hold exactly the stream's records from this node's own
    /// last batch on: a caught-up follower's does; a deposed owner's, with changes the stream never
    /// got, does not (checked record by record, since the LSNs alone may agree).
    ///
    /// With `followed`, the directory's engine was this stream's follower until now (checked when
    /// it was opened, and since then it logged only what it applied from the stream), so the check
    /// record by record, which reads the stream since this node's last batch, is skipped; the log
    /// must still reach the stream's end.
    ///
    /// - Throws: `FAILED_PRECONDITION` when the directory's log is not the stream's (behind it,
    ///   ahead of another node's batches, or different from them), or when records to publish are
    ///   no longer in the log; `UNAVAILABLE` when NATS does not answer; and what
    ///   `Engine(directory:)` throws.
    package static func shardOwner(
        directory: String,
        durability: Durability = .always,
        configuration: EngineConfiguration = EngineConfiguration(),
        metrics: EngineMetrics = .none,
        publisher: ShardPublisher,
        followed: Bool = false,
        retryInterval: Duration = .milliseconds(200),
        closeWait: Duration = .seconds(5)
    ) throws(FanoutError) -> Engine {
        let last = try publisher.lastBatch()
        var check: Engine.LogCheck?
        if let last, !publisher.isOwnTerm(last.term), !followed {
            // A follower taking over: its log must be the stream's, exactly.
            check = try ShardLog.check(directory: directory, against: publisher.stream, publisher.jetStream, node: publisher.node, exactly: true)
        }
        let replication = Engine.Replication(replicatedThrough: last?.lsn ?? 0, retryInterval: retryInterval, closeWait: closeWait) { records, through throws(FanoutError) in
            try publisher.publish(records, through: through)
        }
        return try Engine(directory: directory, durability: durability, configuration: configuration, metrics: metrics, check: check, replication: replication)
    }
}
