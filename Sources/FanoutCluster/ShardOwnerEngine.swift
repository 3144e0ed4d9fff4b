package import FanoutCore
package import FanoutModel

extension Engine {
    /// A shard owner's engine (docs/scale-out.md): opened on its data directory, logging through a
    /// `ReplicatedChangeLog` that publishes each run of durable records with `publisher`, so that a
    /// change is answered once the local log and the shard's stream both hold it.
    ///
    /// The stream's last batch says how far this node's log is in it (its message id carries the
    /// LSN after it); what the directory's log holds beyond (synced, then a crash before the
    /// publish) is published first, under `publisher`'s term, before anything is acknowledged.
    ///
    /// - Throws: `FAILED_PRECONDITION` when another node published the stream's last batch (this
    ///   node must follow it), when the stream holds more of this node's log than the directory
    ///   does, or when records to publish are no longer in the log; `UNAVAILABLE` when NATS does
    ///   not answer; and what `Engine(directory:)` throws.
    package static func shardOwner(
        directory: String,
        durability: Durability = .always,
        configuration: EngineConfiguration = EngineConfiguration(),
        publisher: ShardPublisher,
        retryInterval: Duration = .milliseconds(200)
    ) throws(FanoutError) -> Engine {
        let replicatedThrough = try publisher.lastPublishedLSN() ?? 0
        let replication = Engine.Replication(replicatedThrough: replicatedThrough, retryInterval: retryInterval) { records, through throws(FanoutError) in
            try publisher.publish(records, through: through)
        }
        return try Engine(directory: directory, durability: durability, configuration: configuration, replication: replication)
    }
}
