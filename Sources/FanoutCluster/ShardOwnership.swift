import CNATS
package import FanoutCore

/// Who owns each shard, in a JetStream key-value bucket (docs/scale-out.md): the key `shard-N`
/// holds the owner's node name. A node takes a shard with compare-and-set (create only if the key
/// is absent) and holds it by renewing before the bucket's TTL runs out (update only at the
/// revision it last wrote); a lease not renewed expires with its entry, and another node may then
/// take the shard. Blocking calls, like `JetStream`'s.
package final class ShardOwnership: @unchecked Sendable {
    private let jetStream: JetStream
    private let store: OpaquePointer
    package let lease: Duration

    /// What a node holds: the shard and the revision its last write made (what a renewal must match).
    package struct Lease: Hashable, Sendable {
        package let shard: Int
        package let revision: UInt64
    }

    /// Opens (creating it when missing) the bucket `name`, whose entries live `lease` after their
    /// last write, with `replicas` copies.
    package init(_ jetStream: JetStream, bucket name: String = "fanout-shard-owners", lease: Duration, replicas: Int = 1) throws(FanoutError) {
        var configuration = kvConfig()
        kvConfig_Init(&configuration)
        var store: OpaquePointer?
        let (seconds, attoseconds) = lease.components
        let status = name.withCString { bucket in
            configuration.Bucket = bucket
            configuration.History = 1
            configuration.TTL = seconds * 1_000_000_000 + attoseconds / 1_000_000_000
            configuration.Replicas = Int32(replicas)
            return js_CreateKeyValue(&store, jetStream.context, &configuration)
        }
        guard status == NATS_OK, let store else { throw JetStream.error("cannot open the ownership bucket \(name)", status) }
        self.jetStream = jetStream
        self.store = store
        self.lease = lease
    }

    deinit {
        kvStore_Destroy(self.store)
    }

    /// The shard's owner and its lease's revision, or nil when nobody holds it.
    package func owner(of shard: Int) throws(FanoutError) -> (node: String, revision: UInt64)? {
        var entry: OpaquePointer?
        let status = kvStore_Get(&entry, self.store, Self.key(shard))
        defer { kvEntry_Destroy(entry) }
        if status == NATS_NOT_FOUND { return nil }
        guard status == NATS_OK, let entry else { throw JetStream.error("cannot read the owner of shard \(shard)", status) }
        let count = Int(kvEntry_ValueLen(entry))
        guard count > 0, let value = kvEntry_Value(entry) else { return nil }
        let bytes = UnsafeRawBufferPointer(start: value, count: count)
        return (String(decoding: bytes, as: UTF8.self), kvEntry_Revision(entry))
    }

    /// Takes the shard for `node` if nobody holds it; nil when another node does.
    package func take(_ shard: Int, for node: String) throws(FanoutError) -> Lease? {
        var status = NATS_OK
        // Twice at most: a create refused because the key existed, which then expired before the
        // read, is tried again (the read finding no holder is not an error then).
        for _ in 0..<2 {
            var revision: UInt64 = 0
            status = Array(node.utf8).withUnsafeBytes { value in
                kvStore_Create(&revision, self.store, Self.key(shard), value.baseAddress, Int32(value.count))
            }
            if status == NATS_OK { return Lease(shard: shard, revision: revision) }
            // Refused because the key exists (a holder), or NATS failed: the read says which.
            if try self.owner(of: shard) != nil { return nil }
        }
        throw JetStream.error("cannot take shard \(shard)", status)
    }

    /// Renews `lease` for `node`: the new lease, or nil when it was lost (it expired and another
    /// node wrote the key since): the node must stop acting as the owner.
    package func renew(_ lease: Lease, for node: String) throws(FanoutError) -> Lease? {
        var revision: UInt64 = 0
        let status = Array(node.utf8).withUnsafeBytes { value in
            kvStore_Update(&revision, self.store, Self.key(lease.shard), value.baseAddress, Int32(value.count), lease.revision)
        }
        if status == NATS_OK { return Lease(shard: lease.shard, revision: revision) }
        guard let current = try self.owner(of: lease.shard), current.node == node else { return nil }
        // Still this node's: the update failed, or it was applied and its answer lost (a timeout
        // on a slow server): then the entry is newer than `lease`, and holds this node's name.
        guard current.revision == lease.revision else { return Lease(shard: lease.shard, revision: current.revision) }
        throw JetStream.error("cannot renew shard \(lease.shard)", status)
    }

    private static func key(_ shard: Int) -> String { "shard-\(shard)" }
}
