/// Delivery counts of one project since the engine opened (recovery's replay is not counted),
/// and the deliveries pending now.
public struct DeliveryStatistics: Hashable, Sendable {
    /// Sends accepted (not counting `validateOnly`).
    public var sends = 0
    /// Deliveries put in mailboxes.
    public var enqueued = 0
    /// Deliveries handed to consumers (a redelivery counts again).
    public var delivered = 0
    public var acknowledged = 0
    /// Deliveries whose TTL ran out, and TTL-0 deliveries no consumer could take at once.
    public var expired = 0
    /// Deliveries replaced by a newer message with the same collapse key, or evicted as a fifth key.
    public var collapsed = 0
    /// Deliveries dropped by the 100-pending rule or with a deleted installation's mailbox.
    public var dropped = 0
    /// Recipients refused because their platform payload was over its limit.
    public var rejected = 0
    /// Recipients skipped: without a registration token, or stale when the send skips those.
    public var skipped = 0
    /// Deliveries in mailboxes now (including those a consumer holds unacknowledged).
    public var pending = 0
    /// Messages in memory now (a message goes when its last delivery does).
    public var messages = 0
    /// Consumers attached now.
    public var consumers = 0

    public init() {}
}
