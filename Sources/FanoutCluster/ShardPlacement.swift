import FanoutModel

/// Which live node should own each shard: rendezvous (highest random weight) hashing of the node's
/// name with the shard's number (docs/scale-out.md). Every node computes the same answer from the
/// same list of members, the shards spread evenly over the nodes, and a node joining or leaving
/// moves only the shards it gains or held.
package enum ShardPlacement {
    /// The node among `nodes` that should own `shard`; nil when there are none.
    package static func preferredOwner(of shard: Int, among nodes: some Sequence<String>) -> String? {
        nodes.max { (Self.weight($0, shard), $0) < (Self.weight($1, shard), $1) }
    }

    /// FNV-1a 64-bit over the node's name and the shard's number, then a finalizing mix
    /// (splitmix64's) so that names differing in one character still spread.
    static func weight(_ node: String, _ shard: Int) -> UInt64 {
        var value = FNV1a.hash64(node.utf8) ^ (UInt64(truncatingIfNeeded: shard) &* 0x9e37_79b9_7f4a_7c15)
        value = (value ^ (value >> 30)) &* 0xbf58_476d_1ce4_e5b9
        value = (value ^ (value >> 27)) &* 0x94d0_49bb_1331_11eb
        return value ^ (value >> 31)
    }
}
