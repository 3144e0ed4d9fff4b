import Benchmark
import BenchmarkSupport
import FanoutCore
import FanoutTestSupport

// Heap allocations on the hot paths, held to the counts checked in under `Thresholds/`
// (`make benchmark-check`; `make benchmark-thresholds` records new ones after a deliberate change):
//   - a batch subscribe (1000 registrations by 163-byte token) on an in-memory engine;
//   - validating and rendering a typical ~1 KB FCM v1 body;
//   - a send to a 10k-subscriber topic (enqueued into 10k mailboxes), with an Android worker
//     attached, so the hand-out path is counted too.
// Allocation counts do not depend on the machine's speed, so the check holds on a noisy VM; wall
// time is measured by the other suites.

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.mallocCountTotal],
        warmupIterations: 2,
        maxDuration: .seconds(2),
        maxIterations: 100,
        // Allocation counts are exact from run to run: two more than recorded is a regression.
        thresholds: [.mallocCountTotal: .init(absolute: [.p90: 2])]
    )

    Benchmark("Allocations.subscribe.batch1000") { benchmark in
        let fixture = AllocationFixture.shared
        for index in benchmark.scaledIterations {
            let tokens = fixture.freshBatches[index % fixture.freshBatches.count]
            benchmark.startMeasurement()
            // The strings are packed and parsed in the measurement, as a client and a server do.
            let registrations = RegistrationList(tokens)
            let results = try! fixture.engine.blocking { (changes: inout Engine.Changes) throws(FanoutError) in
                try changes.subscribe(registrations, to: fixture.freshTopic)
            }
            benchmark.stopMeasurement()
            precondition(results.allSatisfy { $0 == .ok }, "every registration of the batch is subscribed")
            _ = try! fixture.engine.blocking { (changes: inout Engine.Changes) throws(FanoutError) in
                try changes.unsubscribe(registrations, from: fixture.freshTopic)
            }
        }
    } setup: {
        _ = AllocationFixture.shared
    }

    Benchmark("Allocations.validateAndRender.typical") { benchmark in
        let body = AllocationFixture.typicalBody
        let now = Timestamp(millisecondsSinceEpoch: 1_767_225_600_000)
        for _ in benchmark.scaledIterations {
            let request = try! MessageParser.parseSendRequest(body)
            blackHole(RenderedMessage((consume request).message, acceptedAt: now))
        }
    }

    Benchmark("Allocations.send.topic10k") { benchmark in
        let fixture = AllocationFixture.shared
        for _ in benchmark.scaledIterations {
            benchmark.startMeasurement()
            blackHole(try! fixture.engine.blocking { (changes: inout Engine.Changes) throws(FanoutError) in
                try changes.send(fixture.topicBody)
            })
            benchmark.stopMeasurement()
            fixture.reset()
        }
    } setup: {
        _ = AllocationFixture.shared
    }
}

/// 10k installations subscribed to one topic, 20k more for fresh batches, and an Android worker.
final class AllocationFixture: Sendable {
    static let shared = AllocationFixture()
    static let typicalBody = Array(
        #"{"message":{"token":"dTxbVurMB3E:APA91b-typical","notification":{"title":"Your order has shipped","body":"Order #1234 is on its way."},"data":{"order_id":"1234","status":"shipped"},"android":{"priority":"high","ttl":"86400s","collapse_key":"order-1234"},"apns":{"headers":{"apns-priority":"10","apns-collapse-id":"order-1234"},"payload":{"aps":{"badge":1,"sound":"default"}}},"webpush":{"headers":{"TTL":"86400"}}}}"#.utf8
    )

    let clock = ManualClock()
    let engine: Engine
    let freshTopic = TopicName("fresh")!
    let topicBody = Array(#"{"message":{"topic":"hot","data":{"k":"v"},"android":{"ttl":"60s"},"apns":{"headers":{"apns-priority":"5"}},"webpush":{"headers":{"TTL":"60"}}}}"#.utf8)
    let freshBatches: [[String]]
    let worker: DeliveryConsumer

    private init() {
        // No send quota: this measures the engine, not its quotas.
        var configuration = EngineConfiguration()
        configuration.sendQuota = .unlimited
        self.engine = Engine(configuration: configuration, clock: self.clock)
        Fixtures.register(30_000, into: self.engine)
        Fixtures.subscribe(0..<10_000, to: TopicName("hot")!, in: self.engine)
        self.freshBatches = stride(from: 10_000, to: 30_000, by: 1000).map { start in (start..<start + 1000).map(Fixtures.token) }
        self.worker = try! self.engine.attachConsumer(.platform(.android), credit: 1000)
    }

    /// The worker takes and acknowledges every Android delivery, the rest expire; unmeasured.
    func reset() {
        while case let taken = self.worker.poll(), !taken.isEmpty {
            _ = try! self.engine.blocking { (changes: inout Engine.Changes) throws(FanoutError) in
                try changes.acknowledge(taken.map(\.id), by: self.worker)
            }
        }
        self.clock.advance(by: .seconds(61 * 86_400))
        _ = try! self.engine.blocking { (changes: inout Engine.Changes) throws(FanoutError) in try changes.expireDeliveries() }
        precondition(try! self.engine.deliveryStatistics().pending == 0)
    }
}
