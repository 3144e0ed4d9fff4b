public import CoreMetrics

/// The engine's metrics (docs/operations.md has the table), emitted through swift-metrics: into
/// the backend the process bootstrapped (`MetricsSystem.bootstrap`), so that an app embedding the
/// engine gets them in its own, or into the factory the engine was opened with. Each handle is made
/// once; the hot paths add to them once per operation (a send, an acknowledgement, a log batch),
/// never once per delivery.
public final class EngineMetrics: Sendable {
    /// The factory every handle was made with; the server and the HTTP front make theirs with it too.
    public let factory: any MetricsFactory

    private let sends: Counter
    private let audience: Recorder
    private let enqueued: Counter
    private let delivered: Counter
    private let acknowledged: Counter
    private let expired: Counter
    private let collapsed: Counter
    private let dropped: Counter
    private let rejected: Counter
    private let skipped: Counter
    private let snapshotDuration: Timer
    private let snapshotSize: Gauge
    private let recoveryDuration: Gauge
    let log: LogMetrics
    /// `fanout_deliveries_pending{project}`, made on a project's first change.
    private let pending = MetricsHandles<ProjectID, Gauge>()
    /// What every handle's dimensions start with (a cluster node's `shard`).
    private let dimensions: [(String, String)]

    /// Handles made with `factory`, each with `dimensions` first (a cluster node labels each
    /// shard's engine with its `shard`).
    public init(factory: any MetricsFactory = MetricsSystem.factory, dimensions: [(String, String)] = []) {
        self.factory = factory
        self.dimensions = dimensions
        self.sends = Counter(label: "fanout_sends_total", dimensions: dimensions, factory: factory)
        self.audience = Recorder(label: "fanout_send_audience_size", dimensions: dimensions, aggregate: true, factory: factory)
        self.enqueued = Counter(label: "fanout_deliveries_queued_total", dimensions: dimensions, factory: factory)
        self.delivered = Counter(label: "fanout_deliveries_handed_out_total", dimensions: dimensions, factory: factory)
        self.acknowledged = Counter(label: "fanout_deliveries_acknowledged_total", dimensions: dimensions, factory: factory)
        self.expired = Counter(label: "fanout_deliveries_expired_total", dimensions: dimensions, factory: factory)
        self.collapsed = Counter(label: "fanout_deliveries_collapsed_total", dimensions: dimensions, factory: factory)
        self.dropped = Counter(label: "fanout_deliveries_dropped_total", dimensions: dimensions, factory: factory)
        self.rejected = Counter(label: "fanout_recipients_rejected_total", dimensions: dimensions, factory: factory)
        self.skipped = Counter(label: "fanout_recipients_skipped_total", dimensions: dimensions, factory: factory)
        self.snapshotDuration = Timer(label: "fanout_snapshot_duration_seconds", dimensions: dimensions, factory: factory)
        self.snapshotSize = Gauge(label: "fanout_snapshot_size_bytes", dimensions: dimensions, factory: factory)
        self.recoveryDuration = Gauge(label: "fanout_recovery_duration_seconds", dimensions: dimensions, factory: factory)
        self.log = LogMetrics(factory: factory, dimensions: dimensions)
    }

    /// Handles that record nothing (a cluster node's copies of the shards it follows).
    package static let none = EngineMetrics(factory: NOOPMetricsHandler.instance)

    /// The engine these handles count for no longer serves here (a cluster node stopped owning
    /// its shard): its gauges read zero, so that sums over the nodes count each shard once.
    package func clearGauges() {
        for gauge in self.pending.removeAll() { gauge.record(0) }
        self.snapshotSize.record(0)
        self.recoveryDuration.record(0)
    }

    /// Adds what one operation on `project` changed in its delivery counters, and sets its
    /// pending deliveries when they changed.
    func record(from before: DeliveryStatistics, to after: DeliveryStatistics, pending: (before: Int, after: Int), in project: ProjectID) {
        if pending.before != pending.after { self.pendingGauge(project).record(pending.after) }
        guard before != after else { return }
        Self.add(after.sends - before.sends, to: self.sends)
        Self.add(after.enqueued - before.enqueued, to: self.enqueued)
        Self.add(after.delivered - before.delivered, to: self.delivered)
        Self.add(after.acknowledged - before.acknowledged, to: self.acknowledged)
        Self.add(after.expired - before.expired, to: self.expired)
        Self.add(after.collapsed - before.collapsed, to: self.collapsed)
        Self.add(after.dropped - before.dropped, to: self.dropped)
        Self.add(after.rejected - before.rejected, to: self.rejected)
        Self.add(after.skipped - before.skipped, to: self.skipped)
    }

    /// A send's audience, for the audience-size histogram.
    func recordSend(audience: Int) {
        self.audience.record(audience)
    }

    func recordSnapshot(duration: Duration, bytes: Int?) {
        self.snapshotDuration.recordNanoseconds(duration.nanoseconds)
        if let bytes { self.snapshotSize.record(bytes) }
    }

    func recordRecovery(duration: Duration) {
        self.recoveryDuration.record(duration.seconds)
    }

    /// A project's pending deliveries are none once it is deleted.
    func projectDeleted(_ project: ProjectID) {
        self.pending.remove(project)?.record(0)
    }

    private func pendingGauge(_ project: ProjectID) -> Gauge {
        self.pending.handle(project) {
            Gauge(label: "fanout_deliveries_pending", dimensions: [("project", project.value)] + self.dimensions, factory: self.factory)
        }
    }

    private static func add(_ amount: Int, to counter: Counter) {
        // Counters only grow; a state rebuilt after a log failure starts its counts again.
        if amount > 0 { counter.increment(by: amount) }
    }
}

/// The write-ahead log's metrics.
struct LogMetrics: Sendable {
    private let records: Counter
    private let batches: Counter
    private let bytes: Counter
    private let syncs: Counter
    private let syncDuration: Timer
    private let recordsPerSync: Recorder
    private let failures: Counter

    init(factory: any MetricsFactory, dimensions: [(String, String)]) {
        self.records = Counter(label: "fanout_log_records_total", dimensions: dimensions, factory: factory)
        self.batches = Counter(label: "fanout_log_batches_total", dimensions: dimensions, factory: factory)
        self.bytes = Counter(label: "fanout_log_bytes_total", dimensions: dimensions, factory: factory)
        self.syncs = Counter(label: "fanout_log_syncs_total", dimensions: dimensions, factory: factory)
        self.syncDuration = Timer(label: "fanout_log_sync_duration_seconds", dimensions: dimensions, factory: factory)
        self.recordsPerSync = Recorder(label: "fanout_log_records_per_sync", dimensions: dimensions, aggregate: true, factory: factory)
        self.failures = Counter(label: "fanout_log_failures_total", dimensions: dimensions, factory: factory)
    }

    /// One batch written (not yet synced).
    func wrote(records: Int, bytes: Int) {
        self.records.increment(by: records)
        self.batches.increment()
        self.bytes.increment(by: bytes)
    }

    /// One `fdatasync` that made `records` durable.
    func synced(records: Int, duration: Duration) {
        self.syncs.increment()
        self.syncDuration.recordNanoseconds(duration.nanoseconds)
        self.recordsPerSync.record(records)
    }

    func failed() {
        self.failures.increment()
    }
}

extension Duration {
    /// Whole nanoseconds, for a swift-metrics `Timer`.
    package var nanoseconds: Int64 {
        let (seconds, attoseconds) = self.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    /// Seconds, for a gauge in Prometheus's base unit.
    var seconds: Double { Double(self.nanoseconds) / 1e9 }
}
