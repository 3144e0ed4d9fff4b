@testable import FanoutCluster
import FanoutCore
import FanoutTestSupport
import Testing

/// The FID-to-shard function is part of a cluster's format: pinned by values computed outside
/// Swift (FNV-1a 64 in Python), and spreading FIDs evenly.
@Suite struct ShardMapTests {
    @Test(arguments: [
        ("cAECAwQFBgcICQoLDA0ODx", 28, 1), ("dFGHIJKLMNOPQRSTUVWXYZ", 19, 0),
        ("e0123456789_-abcdefghi", 38, 1), ("fzzzzzzzzzzzzzzzzzzzzz", 57, 2),
    ])
    func theFunctionIsPinned(fid: String, of64: Int, of3: Int) throws {
        let fid = try #require(FID(fid))
        #expect(ShardMap(count: 64)!.shard(of: fid) == of64)
        #expect(ShardMap(count: 3)!.shard(of: fid) == of3)
        #expect(ShardMap(count: 1)!.shard(of: fid) == 0)
    }

    @Test func generatedFIDsSpreadEvenly() {
        let map = ShardMap(count: 64)!
        var counts = [Int](repeating: 0, count: 64)
        var random = SeededRandomNumberGenerator(seed: 64)
        for _ in 0..<64_000 {
            // Made as the SDKs make them (FID.generate), from seeded bytes.
            let fid = FID.make(fromRandomBytes: (0..<17).map { _ in UInt8.random(in: 0...255, using: &random) })
            counts[map.shard(of: fid)] += 1
        }
        // 1000 expected per shard; a binomial's standard deviation is about 31.
        #expect(counts.allSatisfy { (850...1150).contains($0) }, "\(counts.sorted())")
    }

    @Test func aShardCountOutsideTheRangeIsRefused() {
        #expect(ShardMap(count: 0) == nil && ShardMap(count: 4097) == nil && ShardMap(count: -1) == nil)
    }
}
