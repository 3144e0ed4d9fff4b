import FanoutServer
import Testing

@Suite("Allocator policy")
struct AllocatorPolicyTests {
    /// The policy sets glibc's mmap threshold to 1 MiB, unless the operator chose one; glibc takes
    /// the value. (Its effect on fanoutd's memory is measured by fanout-load, docs/performance.md:
    /// within a test process, whose other tests free large blocks meanwhile, whether one block is
    /// mapped depends on what glibc's free lists hold at that moment.)
    @Test func theThresholdIsSetUnlessTheOperatorChoseOne() {
        var set: [Int32] = []
        let record = { (threshold: Int32) -> Bool in
            set.append(threshold)
            return true
        }
        #expect(!AllocatorPolicy.apply(environment: ["MALLOC_MMAP_THRESHOLD_": "131072"], setThreshold: record))
        #expect(!AllocatorPolicy.apply(environment: ["GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=65536"], setThreshold: record))
        #expect(set.isEmpty)
        #expect(AllocatorPolicy.apply(environment: ["GLIBC_TUNABLES": "glibc.malloc.tcache_count=0"], setThreshold: record))
        #expect(set == [1 << 20])
        #expect(AllocatorPolicy.apply(environment: [:]), "glibc takes the value")
    }
}
