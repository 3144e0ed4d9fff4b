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
    public var quiet = false

    public init() {}
}
