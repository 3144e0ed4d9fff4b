import BenchmarkSupport
import FanoutCore
import FanoutTestSupport

#if canImport(Glibc)
import Glibc
#endif

/// 1.2M installations; topics of 1k, 100k and 1M subscribers; 200 batches of 1000 unsubscribed tokens.
final class SubscribeFixture: Sendable {
    static let shared = SubscribeFixture()

    let engine = Engine()
    let topics: [Int: TopicName]
    let freshBatches: [[String]]

    private init() {
        let installed = 1_000_000
        let fresh = 200_000
        Fixtures.register(installed + fresh, into: self.engine)
        var topics: [Int: TopicName] = [:]
        for size in [1_000, 100_000, 1_000_000] {
            let topic = TopicName("subscribe-\(size)")!
            Fixtures.subscribe(0..<size, to: topic, in: self.engine)
            topics[size] = topic
        }
        self.topics = topics
        var random = SeededRandomNumberGenerator(seed: 42)
        var order = Array(installed..<(installed + fresh))
        order.shuffle(using: &random)
        self.freshBatches = stride(from: 0, to: fresh, by: 1000).map { start in
            order[start..<(start + 1000)].map(Fixtures.token)
        }
    }

    func topic(_ size: Int) -> TopicName { self.topics[size]! }
}

/// 2M installations; topics of 1M, 500k, 100k, 10k, 1k random subscribers; a 5-atom condition.
final class AudienceFixture: Sendable {
    static let shared = AudienceFixture()

    let engine = Engine()
    let topics: [TopicName]
    let condition: Condition
    let fourMegabytes = [UInt32](repeating: 7, count: 1_000_000)

    private init() {
        let installations = 2_000_000
        Fixtures.register(installations, into: self.engine)
        var random = SeededRandomNumberGenerator(seed: 7)
        var topics: [TopicName] = []
        for size in [1_000_000, 500_000, 100_000, 10_000, 1_000] {
            let topic = TopicName("audience-\(Fixtures.label(size))")!
            var members = Array(0..<installations)
            members.shuffle(using: &random)
            Fixtures.subscribe(members.prefix(size), to: topic, in: self.engine)
            topics.append(topic)
        }
        self.topics = topics
        self.condition = try! Condition(
            parsing: "'audience-1M' in topics && ('audience-500k' in topics || 'audience-100k' in topics) "
                + "&& !('audience-10k' in topics) || 'audience-1k' in topics"
        )
    }
}

/// Heap bytes per installation (163-byte token + FID) and per 1000 subscriptions at 1M x 20 topics.
enum MemoryFixture {
    enum Layout: String, CaseIterable, CustomStringConvertible {
        /// 20 topics that every installation is subscribed to (bitmap chunks).
        case dense
        /// Every installation in 20 of 1000 topics, at random (~20k subscribers each: array chunks).
        case sparse

        var description: String { self.rawValue }
    }

    static func measure(_ layout: Layout) -> (perInstallation: Int, perThousandSubscriptions: Int) {
        let installations = 1_000_000
        // Who subscribes to what is planned before the first heap reading, so the plan is not counted.
        var plan: [(topic: TopicName, members: [Int])] = []
        switch layout {
        case .dense:
            plan = (0..<20).map { (TopicName("dense-\($0)")!, Array(0..<installations)) }
        case .sparse:
            var random = SeededRandomNumberGenerator(seed: 99)
            var members: [[Int]] = Array(repeating: [], count: 1000)
            for installation in 0..<installations {
                var chosen = Set<Int>()
                while chosen.count < 20 { chosen.insert(Int.random(in: 0..<1000, using: &random)) }
                for topic in chosen { members[topic].append(installation) }
            }
            plan = members.enumerated().map { (TopicName("sparse-\($0.offset)")!, $0.element) }
        }
        let before = Fixtures.heapInUse()
        let engine = Engine()
        Fixtures.register(installations, into: engine)
        let registered = Fixtures.heapInUse()
        for (topic, members) in plan {
            Fixtures.subscribe(members, to: topic, in: engine)
        }
        let subscribed = Fixtures.heapInUse()
        withExtendedLifetime((engine, plan)) {}
        return ((registered - before) / installations, (subscribed - registered) * 1000 / (installations * 20))
    }
}
