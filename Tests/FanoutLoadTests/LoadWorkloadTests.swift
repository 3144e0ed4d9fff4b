import FanoutCore
import FanoutLoad
import Testing

/// The harness's data: valid FIDs and 163-byte tokens, the same for a seed and different across
/// seeds, Zipf topic sizes with distinct members, conditions the engine parses.
@Suite("Load workload")
struct LoadWorkloadTests {
    let workload = LoadWorkload(seed: 5, installations: 10_000, topics: 100)

    @Test func installationsAreValidDistinctAndRepeatable() throws {
        var fids = Set<String>()
        var tokens = Set<String>()
        var platforms: [Platform: Int] = [:]
        for index in 0..<self.workload.installations {
            let fid = self.workload.fid(index)
            let token = self.workload.token(index)
            #expect(FID(fid) != nil, "\(fid) is a FID")
            #expect(token.utf8.count == 163)
            #expect(RegistrationToken(token) != nil)
            #expect(token.hasPrefix(fid + ":APA91b"))
            fids.insert(fid)
            tokens.insert(token)
            platforms[self.workload.platform(index), default: 0] += 1
        }
        #expect(fids.count == self.workload.installations && tokens.count == self.workload.installations)
        #expect(self.workload.token(7, generation: 1) != self.workload.token(7), "a refresh gives a new token")
        #expect(LoadWorkload(seed: 5, installations: 10, topics: 1).token(3) == self.workload.token(3), "the seed decides")
        #expect(LoadWorkload(seed: 6, installations: 10, topics: 1).token(3) != self.workload.token(3))
        // Past the installations (mixed registers new ones) tokens are made on demand, the same way.
        #expect(LoadWorkload(seed: 5, installations: 10, topics: 1).token(500) == self.workload.token(500))
        #expect(LoadWorkload(seed: 5, installations: 10, topics: 1).fid(500) == self.workload.fid(500))
        // register-batch's installations (as many again, past the workload's), made ahead: the same.
        let ahead = LoadWorkload(seed: 5, installations: 300, topics: 1, withBatchInstallations: true)
        #expect(ahead.batchInstallations == 300..<600 && ahead.installations == 300)
        #expect(ahead.token(500) == self.workload.token(500) && ahead.fid(500) == self.workload.fid(500))
        #expect(ahead.token(599) == self.workload.token(599) && ahead.token(700) == self.workload.token(700))
        // Six, three and one in ten, within a few percent.
        #expect(abs(platforms[.android, default: 0] - 6000) < 300)
        #expect(abs(platforms[.ios, default: 0] - 3000) < 300)
        #expect(abs(platforms[.web, default: 0] - 1000) < 300)
    }

    @Test func topicsFollowZipfWithDistinctMembers() {
        var total = 0
        for rank in 1...self.workload.topics {
            let members = self.workload.subscribers(ofRank: rank)
            #expect(members.count == max(1, 5000 / rank), "rank \(rank)")
            #expect(Set(members).count == members.count, "members of rank \(rank) are distinct")
            #expect(members.allSatisfy { $0 >= 0 && $0 < self.workload.installations })
            total += members.count
        }
        #expect(total == self.workload.subscriptionCount)
        let batches = self.workload.subscriptionBatches(size: 1000)
        #expect(batches.reduce(0) { $0 + $1.members.count } == total)
        #expect(batches.allSatisfy { $0.members.count <= 1000 && !$0.members.isEmpty })
    }

    @Test func sendsFavourPopularTopicsAndConditionsParse() throws {
        let ranks = (0..<2000).map { self.workload.sendRank($0) }
        #expect(ranks.allSatisfy { (1...self.workload.topics).contains($0) })
        // P(rank 1) = 1 / H(100) = 19%; the tail's hundred-odd ranks share the rest.
        let first = ranks.filter { $0 == 1 }.count
        #expect(first > 300 && first < 480, "\(first) of 2000 sends to the most popular topic")
        for index in 0..<50 {
            let condition = self.workload.condition(index)
            #expect(Set([condition.all] + condition.anyOf).count == 3)
            _ = try Condition(parsing: condition.expression)
        }
    }
}
