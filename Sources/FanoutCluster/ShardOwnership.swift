package import FanoutCore

/// Who owns each shard, in a JetStream key-value bucket (docs/scale-out.md): the key `shard-N`
/// holds the owner's node name. A node takes a shard with compare-and-set (only if nobody holds
/// it) and holds it by renewing before the bucket's TTL runs out (update only at the revision it
/// last wrote); a lease not renewed expires with its entry, and another node may then take the
/// shard. An owner hands a shard on by releasing it (an empty value at its revision), which frees
/// it at once. Blocking calls, like `JetStream`'s.
package final class ShardOwnership: Sendable {
    private let bucket: KeyValueBucket
    package let lease: Duration

    /// What a node holds: the shard and the revision its last write made (what a renewal must match).
    package struct Lease: Hashable, Sendable {
        package let shard: Int
        package let revision: UInt64
    }

    static let bucket = "fanout-shard-owners"

    /// Opens (creating it when missing) the bucket `name`, whose entries live `lease` after their
    /// last write, with `replicas` copies; each request waits at most `requestWait` for its answer
    /// (JetStream's default: 5 s), so that a renewal whose answer is lost gives up in time.
    package init(
        _ jetStream: JetStream, bucket name: String = ShardOwnership.bucket, lease: Duration, replicas: Int = 1, requestWait: Duration? = nil
    ) throws(FanoutError) {
        self.bucket = try KeyValueBucket(jetStream, name: name, ttl: lease, replicas: replicas, requestWait: requestWait)
        self.lease = lease
    }

    /// The shard's owner and its lease's revision, or nil when nobody holds it.
    package func owner(of shard: Int) throws(FanoutError) -> (node: String, revision: UInt64)? {
        guard let entry = try self.bucket.entry(Self.key(shard)), !entry.value.isEmpty else { return nil }
        return (String(decoding: entry.value, as: UTF8.self), entry.revision)
    }

    /// Takes the shard for `node` if nobody holds it; nil when another node does.
    package func take(_ shard: Int, for node: String) throws(FanoutError) -> Lease? {
        let key = Self.key(shard)
        // Twice at most: the entry may expire between the read and the write.
        for _ in 0..<2 {
            let revision: UInt64?
            if let entry = try self.bucket.entry(key) {
                guard entry.value.isEmpty else { return nil }  // held
                revision = try self.bucket.update(key, Array(node.utf8), at: entry.revision)  // released
            } else {
                revision = try self.bucket.create(key, Array(node.utf8))
            }
            if let revision { return Lease(shard: shard, revision: revision) }
        }
        return nil
    }

    /// Renews `lease` for `node`: the new lease, or nil when it was lost (it expired and another
    /// node wrote the key since): the node must stop acting as the owner.
    package func renew(_ lease: Lease, for node: String) throws(FanoutError) -> Lease? {
        try self.bucket.update(Self.key(lease.shard), Array(node.utf8), at: lease.revision).map { Lease(shard: lease.shard, revision: $0) }
    }

    /// Frees the shard `lease` holds, at once, for another node to take: the owner has stopped
    /// acting as the owner. Nothing happens when the lease was lost meanwhile.
    package func release(_ lease: Lease) throws(FanoutError) {
        _ = try self.bucket.update(Self.key(lease.shard), [], at: lease.revision)
    }

    private static func key(_ shard: Int) -> String { "shard-\(shard)" }
}
