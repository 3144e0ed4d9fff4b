import FanoutServer
import Glibc
import Testing

@Suite("Allocator policy")
struct AllocatorPolicyTests {
    /// Whether glibc serves `block` as a mapping of its own: the IS_MMAPPED bit (2) of the size
    /// word before it, read per block so that other tests' allocations meanwhile do not matter.
    static func isMapped(_ block: UnsafeMutableRawPointer) -> Bool {
        (block - MemoryLayout<Int>.size).load(as: UInt.self) & 2 != 0
    }

    /// With the policy, a 2 MiB block is a mapping of its own even after a 4 MiB one was freed
    /// (glibc alone would have raised its threshold to 4 MiB and served it from the heap); an
    /// operator's own threshold is left alone.
    @Test func largeBlocksStayMappingsOfTheirOwn() throws {
        #expect(!AllocatorPolicy.apply(environment: ["MALLOC_MMAP_THRESHOLD_": "131072"]))
        #expect(!AllocatorPolicy.apply(environment: ["GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=65536"]))
        #expect(AllocatorPolicy.apply(environment: [:]))
        let large = try #require(malloc(4 << 20))
        #expect(Self.isMapped(large))
        free(large)
        let block = try #require(malloc(2 << 20))
        defer { free(block) }
        #expect(Self.isMapped(block), "the 2 MiB block is mapped on its own")
    }
}
