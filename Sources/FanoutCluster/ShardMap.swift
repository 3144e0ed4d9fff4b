package import FanoutCore
package import FanoutModel

/// Which shard an installation lives in: its FID's FNV-1a 64-bit hash over the FID's characters,
/// modulo the shard count fixed when the cluster is created (docs/scale-out.md). The function is
/// part of the cluster's format: changing it would move every installation, so tests pin it.
package struct ShardMap: Hashable, Sendable {
    package let count: Int

    /// `nil` unless `count` is 1 to 4096.
    package init?(count: Int) {
        guard (1...4096).contains(count) else { return nil }
        self.count = count
    }

    /// The shard of `fid`, 0 ..< count.
    package func shard(of fid: FID) -> Int {
        self.shard(hashing: fid.string)
    }

    /// Where an installation registered with `token` and no FID goes (its engine then gives it a
    /// FID of that shard): the same function over the token's characters. Registrations of one new
    /// token through different nodes thereby meet on one shard, which keeps the token unique.
    package func shard(of token: RegistrationToken) -> Int {
        self.shard(hashing: token.value)
    }

    /// The message sequences shard `shard`'s engine gives: those with `sequence % count == shard`,
    /// so that a message id is unique across the cluster and names its shard.
    package func messageSequences(ofShard shard: Int) -> MessageSequences {
        MessageSequences(offset: UInt64(shard), stride: UInt64(self.count))
    }

    /// The shard whose engine handed out the delivery `id` (a "deleted messages" marker's too).
    package func shard(of id: DeliveryID) -> Int {
        Int((id.messageSequence & ~DeliveryID.markerBit) % UInt64(self.count))
    }

    private func shard(hashing string: String) -> Int {
        Int(FNV1a.hash64(string.utf8) % UInt64(self.count))
    }
}
