import Benchmark
import BenchmarkSupport
import FanoutCore
import FanoutTestSupport

// Fan-out into mailboxes and the consumer path (issue 5):
//   - a send to a topic of 1M installations, and to a 5-atom condition over 2M, from the call to
//     every delivery enqueued (deliveries per second = deliveries per send / wall clock);
//   - heap bytes per pending delivery after each of those sends (in tenths of a byte; the mailbox
//     heads, 12 bytes per installation, are allocated by an unmeasured send before);
//   - a platform worker taking and acknowledging 100k deliveries through the in-process consumer
//     API, 1000 at a time (in memory: the durable cost of an acknowledgement is the log's, measured
//     in DurabilityBenchmarks).
// Between iterations the deliveries are expired (TTL 60 s, clock moved), unmeasured.
//   - the expiry sweep (fanoutd runs it every second, under the project's lock) over 100k pending
//     messages of one recipient each, none of them due: the cost of the scan alone.

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .mallocCountTotal],
        warmupIterations: 1,
        maxDuration: .seconds(5),
        maxIterations: 50
    )

    let deliveriesPerSend = BenchmarkMetric.custom("deliveries per send", useScalingFactor: false)
    let bytesPerDelivery = BenchmarkMetric.custom("heap bytes per pending delivery (tenths)", useScalingFactor: false)
    for (name, body) in [("topic1M", \FanoutFixture.topicBody), ("condition5.2M", \FanoutFixture.conditionBody)] {
        Benchmark(
            "Fanout.\(name)",
            configuration: .init(metrics: [.wallClock, .mallocCountTotal, deliveriesPerSend]),
            closure: { benchmark in
                let fixture = FanoutFixture.shared
                for _ in benchmark.scaledIterations {
                    benchmark.startMeasurement()
                    let result = try! fixture.engine.blocking { (changes: inout Engine.Changes) throws(FanoutError) in try changes.send(fixture[keyPath: body]) }
                    benchmark.stopMeasurement()
                    benchmark.measurement(deliveriesPerSend, result.enqueued)
                    fixture.expireEverything()
                }
            },
            setup: { _ = FanoutFixture.shared }
        )

        Benchmark(
            "Memory.pendingDelivery.\(name)",
            configuration: .init(metrics: [bytesPerDelivery], warmupIterations: 0, maxIterations: 1),
            closure: { benchmark in
                let fixture = FanoutFixture.shared
                // The first fan-out also allocates the mailbox heads (12 bytes per installation up to
                // the highest slot it reaches), a per-installation cost: measure a later one.
                _ = try! fixture.engine.blocking { (changes: inout Engine.Changes) throws(FanoutError) in try changes.send(fixture[keyPath: body]) }
                fixture.expireEverything()
                let before = Fixtures.heapInUse()
                let result = try! fixture.engine.blocking { (changes: inout Engine.Changes) throws(FanoutError) in try changes.send(fixture[keyPath: body]) }
                let after = Fixtures.heapInUse()
                benchmark.measurement(bytesPerDelivery, (after - before) * 10 / result.enqueued)
                fixture.expireEverything()
            },
            setup: { _ = FanoutFixture.shared }
        )
    }

    Benchmark(
        "Expiry.sweep.100kMessages.noneDue",
        closure: { benchmark in
            let engine = SweepFixture.shared.engine
            for _ in benchmark.scaledIterations {
                let expired = try! engine.blocking { (changes: inout Engine.Changes) throws(FanoutError) in try changes.expireDeliveries() }
                precondition(expired == 0)
            }
        },
        setup: { _ = SweepFixture.shared }
    )

    // The send quotas' cost on the path they touch most: 10k sends, each to its own token (TTL 0
    // with no consumer: nothing is queued), with the device quotas on (the project's set too high
    // to bind) against no quota at all.
    for (name, fixture) in [("unlimited", QuotaFixture.unlimited), ("deviceQuotas", QuotaFixture.deviceQuotas)] {
        Benchmark(
            "Send.token.10k.\(name)",
            closure: { benchmark in
                for _ in benchmark.scaledIterations {
                    for body in fixture.bodies {
                        _ = try! fixture.engine.blocking { (changes: inout Engine.Changes) throws(FanoutError) in try changes.send(body) }
                    }
                }
            },
            setup: { _ = fixture.engine }
        )
    }

    Benchmark(
        "Consumer.worker.take+ack.100k",
        closure: { benchmark in
            let fixture = FanoutFixture.shared
            for _ in benchmark.scaledIterations {
                _ = try! fixture.engine.blocking { (changes: inout Engine.Changes) throws(FanoutError) in try changes.send(fixture.smallTopicBody) }
                benchmark.startMeasurement()
                let worker = try! fixture.engine.attachConsumer(.platform(.android), credit: 1000)
                var acknowledged = 0
                while acknowledged < 100_000 {
                    let batch = worker.poll()
                    acknowledged += try! fixture.engine.blocking { (changes: inout Engine.Changes) throws(FanoutError) in try changes.acknowledge(batch.map(\.id), by: worker) }
                }
                worker.detach()
                benchmark.stopMeasurement()
                fixture.expireEverything()
            }
        },
        setup: { _ = FanoutFixture.shared }
    )
}

/// 2M installations on three platforms; topics of 1M, 500k, 100k, 10k and 1k random members, as in
/// the audience benchmarks, and a topic of 100k Android installations.
/// 100k installations with one pending message each (a send to its token, TTL one day).
final class SweepFixture: Sendable {
    static let shared = SweepFixture()
    let engine = Engine(configuration: .unlimitedSends)

    private init() {
        Fixtures.register(100_000, into: self.engine)
        for index in 0..<100_000 {
            let body = Array(#"{"message":{"token":"\#(Fixtures.token(index))","data":{"k":"v"},"android":{"ttl":"86400s"},"webpush":{"headers":{"TTL":"86400"}}}}"#.utf8)
            _ = try! self.engine.blocking { (changes: inout Engine.Changes) throws(FanoutError) in try changes.send(body) }
        }
        precondition(try! self.engine.deliveryStatistics().pending == 100_000)
    }
}

/// 10k installations and a send to each one's token (TTL 0), in an engine with the given quota.
final class QuotaFixture: Sendable {
    static let unlimited = QuotaFixture(.unlimited)
    static let deviceQuotas = QuotaFixture(SendQuota(projectMessagesPerMinute: 1_000_000_000, deviceMessagesPerMinute: 240, deviceMessagesPerHour: 5000))
    let engine: Engine
    let bodies: [[UInt8]]

    private init(_ quota: SendQuota) {
        var configuration = EngineConfiguration()
        configuration.sendQuota = quota
        // A clock that stays put: each iteration takes one of a device's 240 a minute.
        self.engine = Engine(configuration: configuration, clock: ManualClock())
        Fixtures.register(10_000, into: self.engine)
        self.bodies = (0..<10_000).map { Array(#"{"message":{"token":"\#(Fixtures.token($0))","android":{"ttl":"0s"},"apns":{"headers":{"apns-expiration":"0"}},"webpush":{"headers":{"TTL":"0"}}}}"#.utf8) }
    }
}

final class FanoutFixture: Sendable {
    static let shared = FanoutFixture()

    let clock = ManualClock()
    let engine: Engine
    let topicBody: [UInt8]
    let conditionBody: [UInt8]
    let smallTopicBody: [UInt8]

    private init() {
        self.engine = Engine(configuration: .unlimitedSends, clock: self.clock)
        let installations = 2_000_000
        Fixtures.register(installations, into: self.engine)
        var random = SeededRandomNumberGenerator(seed: 7)
        for size in [1_000_000, 500_000, 100_000, 10_000, 1_000] {
            var members = Array(0..<installations)
            members.shuffle(using: &random)
            Fixtures.subscribe(members.prefix(size), to: TopicName("audience-\(Fixtures.label(size))")!, in: self.engine)
        }
        // Token index i is on platform i % 3: these are all Android.
        Fixtures.subscribe(stride(from: 0, to: 300_000, by: 3), to: TopicName("android-100k")!, in: self.engine)
        let condition = "'audience-1M' in topics && ('audience-500k' in topics || 'audience-100k' in topics) "
            + "&& !('audience-10k' in topics) || 'audience-1k' in topics"
        let expiration = self.clock.now().millisecondsSinceEpoch / 1000 + 60
        let message = #""data":{"score":"850","time":"2:45"},"android":{"ttl":"60s"},"apns":{"headers":{"apns-expiration":"\#(expiration)","apns-priority":"5"}},"webpush":{"headers":{"TTL":"60"}}"#
        self.topicBody = Array(#"{"message":{"topic":"audience-1M",\#(message)}}"#.utf8)
        self.conditionBody = Array(#"{"message":{"condition":"\#(condition)",\#(message)}}"#.utf8)
        self.smallTopicBody = Array(#"{"message":{"topic":"android-100k",\#(message)}}"#.utf8)
    }

    /// Moves past every delivery's expiry, sweeps, and moves the clock back to where it was, so
    /// that the next send's absolute `apns-expiration` is in the future again.
    func expireEverything() {
        self.clock.advance(by: .seconds(61))
        _ = try! self.engine.blocking { (changes: inout Engine.Changes) throws(FanoutError) in try changes.expireDeliveries() }
        precondition(try! self.engine.deliveryStatistics().pending == 0)
        self.clock.advance(by: .seconds(-61))
    }
}

extension EngineConfiguration {
    /// FCM's defaults with no send quota: these benchmarks measure the engine, not its quotas.
    static var unlimitedSends: EngineConfiguration {
        var configuration = EngineConfiguration()
        configuration.sendQuota = .unlimited
        return configuration
    }
}
