/// How hard and how long a run drives the systems.
public struct LoadOptions: Sendable {
    /// Workers running closed-loop operations at once (registrations, subscriptions).
    public var concurrency = 64
    /// Connections the workers share (they pipeline on them).
    public var connections = 4
    /// Sends in the send scenarios.
    public var sends = 200
    /// Sends in flight at once.
    public var sendConcurrency = 8
    /// fanout consumer connections draining deliveries.
    public var consumers = 3
    /// Operations per second in `mixed`.
    public var rate = 2000
    /// How long `mixed` runs.
    public var duration: Duration = .seconds(10)
    /// Batches of 1000 registrations in flight at once in `register-batch`.
    public var batchConcurrency = 8
    /// What fanoutd answers each batch item with in `register-batch`.
    public var batchReplies = BatchReplies.fids
    /// Connections `connections` holds open at once.
    public var idleConnections = 10_000
    /// Round trips per phase in `latency` (one at a time).
    public var latencyRequests = 20_000
    /// Sends of each kind in http-send.
    public var tokenSends = 20_000
    /// In `cluster`, each node's `--snapshot-every` (seconds; 0: none).
    public var nodeSnapshotEvery = 600
    public var quiet = false
    /// Run the fanoutd the harness starts with TLS (a development certificate), and every client over it.
    public var tls = false
    /// In `connections`, connect as devices (each with its own installation's auth token).
    public var devices = false

    public init() {}
}

/// What `register-batch` asks fanoutd to answer each item with.
public enum BatchReplies: String, Sendable, CaseIterable {
    /// Its FID and flags (REGISTER_BATCH_FIDS), as an import needs; Redis's HSET answers a count.
    case fids
    /// The whole installation (REGISTER_BATCH).
    case installations
}
