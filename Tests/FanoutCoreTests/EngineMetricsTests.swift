import CoreMetrics
import FanoutCore
import FanoutTestSupport
import Foundation
import MetricsTestKit
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The engine's metrics reach the swift-metrics backend it is given, as an app embedding it would
/// see them: counts of what happened, the pending gauge, the log, snapshots and recovery.
@Suite("Engine metrics")
struct EngineMetricsTests {
    @Test func anEmbeddedEngineEmitsWhatItDid() async throws {
        try await TemporaryDirectory.with("fanout-metrics") { directory in
            let metrics = TestMetrics()
            let engine = try Engine(directory: directory, durability: .always, logRetryInterval: .milliseconds(5), metrics: EngineMetrics(factory: metrics))
            defer { try? engine.close() }
            #expect(try metrics.expectGauge("fanout_recovery_duration_seconds").lastValue ?? -1 >= 0)
            let tokens = (0..<3).map { "m\($0)" }
            for token in tokens {
                try await engine.register(RegistrationRequest(token: RegistrationToken(token), platform: .android, appID: AppID("app")!))
            }
            _ = try await engine.subscribe(tokens.map { .token(RegistrationToken($0)!) }, to: TopicName("news")!)
            _ = try await engine.send(Array(#"{"message":{"topic":"news","data":{"k":"v"}}}"#.utf8))
            _ = try await engine.send(Array(#"{"message":{"token":"m0","data":{"k":"w"}}}"#.utf8))
            _ = try await engine.send(Array(#"{"validate_only":true,"message":{"topic":"news"}}"#.utf8))

            #expect(try metrics.expectCounter("fanout_sends_total").totalValue == 2, "a dry run is not a send")
            #expect(try metrics.expectRecorder("fanout_send_audience_size").values == [3, 1])
            #expect(try metrics.expectCounter("fanout_deliveries_queued_total").totalValue == 4)
            #expect(try metrics.expectGauge("fanout_deliveries_pending", [("project", "default")]).lastValue == 4)

            let worker = try engine.attachConsumer(.platform(.android), credit: 10)
            let taken = worker.poll()
            #expect(taken.count == 4)
            #expect(try await worker.acknowledge(taken.map(\.id)) == 4)
            #expect(try metrics.expectCounter("fanout_deliveries_handed_out_total").totalValue == 4)
            #expect(try metrics.expectCounter("fanout_deliveries_acknowledged_total").totalValue == 4)
            #expect(try metrics.expectGauge("fanout_deliveries_pending", [("project", "default")]).lastValue == 0)

            // Three registrations, a subscription, two sends, an acknowledgement: each its own sync.
            let records = try metrics.expectCounter("fanout_log_records_total").totalValue
            #expect(records == 7)
            #expect(try metrics.expectCounter("fanout_log_syncs_total").totalValue == 7)
            #expect(try metrics.expectRecorder("fanout_log_records_per_sync").values.reduce(0, +) == Double(records))
            #expect(try metrics.expectTimer("fanout_log_sync_duration_seconds").values.count == 7)
            #expect(try metrics.expectCounter("fanout_log_bytes_total").totalValue > 0)

            try engine.snapshot()
            #expect(try metrics.expectTimer("fanout_snapshot_duration_seconds").values.count == 1)
            #expect(try metrics.expectGauge("fanout_snapshot_size_bytes").lastValue ?? 0 > 0)

            FileFaults.inject(.init(.sync, pathContains: directory, code: EIO))
            await #expect(throws: FanoutError(.unavailable, "")) {
                try await engine.register(RegistrationRequest(token: RegistrationToken("refused"), platform: .android, appID: AppID("app")!))
            }
            FileFaults.clear(pathContains: directory)
            #expect(try metrics.expectCounter("fanout_log_failures_total").totalValue == 1)
        }
    }
}
