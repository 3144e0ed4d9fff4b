internal import CFanoutMalloc

/// fanoutd's policy for glibc's allocator: blocks of 1 MiB and more are always their own mappings,
/// given back to the system when freed. glibc otherwise raises that threshold to the size of each
/// mapped block freed (up to 32 MiB), so once the registry's arrays have doubled a few times their
/// next generations come from the heap, and the old ones they replace stay resident as holes
/// (about 17 bytes per installation at 100,000 installations, 20-30 per subscription: see
/// docs/performance.md). Fixing it also fixes glibc's trim threshold at 128 KiB, so the heap's
/// free top goes back sooner: part of the gain, and of the few percent of throughput it costs
/// (`--malloc-policy glibc` opts out). A process-wide choice, made by the daemon, not by the engine
/// it embeds.
public enum AllocatorPolicy {
    /// The threshold fanoutd fixes.
    public static let mmapThreshold: Int32 = 1 << 20

    /// Fixes glibc's mmap threshold at `mmapThreshold`, unless the operator chose one
    /// (`MALLOC_MMAP_THRESHOLD_`, or `mmap_threshold` in `GLIBC_TUNABLES`). Whether it did.
    /// `setThreshold` is glibc's `mallopt(M_MMAP_THRESHOLD, _)` (true when glibc took the value).
    @discardableResult
    public static func apply(environment: [String: String], setThreshold: (Int32) -> Bool = Self.setGlibcThreshold) -> Bool {
        guard environment["MALLOC_MMAP_THRESHOLD_"] == nil,
            !(environment["GLIBC_TUNABLES"] ?? "").contains("mmap_threshold")
        else { return false }
        return setThreshold(Self.mmapThreshold)
    }

    /// glibc's `mallopt(M_MMAP_THRESHOLD, bytes)`; whether glibc took the value.
    public static func setGlibcThreshold(_ bytes: Int32) -> Bool {
        mallopt(M_MMAP_THRESHOLD, bytes) == 1
    }
}
