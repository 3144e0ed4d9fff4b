public import Prometheus

extension HTTPFront {
    /// A swift-prometheus factory writing into `registry`, with histogram buckets sized for what
    /// fanout measures: request and fsync latencies from 50 µs, audiences up to 10 million,
    /// records per sync up to 10,000 (the swift-prometheus defaults start at 5 ms and end at 10,000).
    public static func prometheusFactory(registry: PrometheusCollectorRegistry) -> PrometheusMetricsFactory {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = [
            .microseconds(50), .microseconds(100), .microseconds(250), .microseconds(500),
            .milliseconds(1), .milliseconds(2.5), .milliseconds(5), .milliseconds(10), .milliseconds(25),
            .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500),
            .seconds(1), .seconds(2.5), .seconds(5), .seconds(10), .seconds(30), .seconds(60),
        ]
        factory.valueHistogramBuckets["fanout_send_audience_size"] = [1, 10, 100, 1000, 10_000, 100_000, 1_000_000, 10_000_000]
        factory.valueHistogramBuckets["fanout_log_records_per_sync"] = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000]
        return factory
    }
}
