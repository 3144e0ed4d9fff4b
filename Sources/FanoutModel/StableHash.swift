/// FNV-1a, 64 bits: a hash that is the same in every process and on every machine (unlike
/// `Hasher`), for what is persisted or agreed between nodes: retired-token tombstones, an
/// installation's shard, a shard's placement. Changing it changes those formats.
package enum FNV1a {
    /// The hash of `bytes`, continuing from `hash` (the offset basis to start).
    @inlinable
    package static func hash64(_ bytes: some Sequence<UInt8>, from hash: UInt64 = 0xcbf2_9ce4_8422_2325) -> UInt64 {
        var hash = hash
        for byte in bytes {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        return hash
    }
}
