/// FCM's send quotas (fcm-rules.md section 5.3): how many messages a project may send a minute, and
/// how many may go to one device a minute and an hour. A send over a quota is refused with
/// `RESOURCE_EXHAUSTED` (HTTP 429, FCM's `QUOTA_EXCEEDED`) and changes nothing; its error's
/// `retryAfter` says when one more message fits. `nil` turns a limit off.
///
/// The project quota counts every send request that reaches the project (a topic send is one
/// message, as FCM counts), including `validate_only` sends and sends refused as invalid, but not
/// sends refused by a quota. The device quotas count sends to one token or FID; sends to a topic,
/// condition, user or multicast count against the project quota only. Quotas live in memory:
/// a restart starts them full.
public struct SendQuota: Hashable, Sendable {
    /// Messages one project may send a minute, in a burst or spread out (FCM: 600,000).
    public var projectMessagesPerMinute: Int?
    /// Messages to one device a minute (FCM's Android limit: 240).
    public var deviceMessagesPerMinute: Int?
    /// Messages to one device an hour (FCM's Android limit: 5,000).
    public var deviceMessagesPerHour: Int?

    public init(projectMessagesPerMinute: Int?, deviceMessagesPerMinute: Int?, deviceMessagesPerHour: Int?) {
        self.projectMessagesPerMinute = projectMessagesPerMinute
        self.deviceMessagesPerMinute = deviceMessagesPerMinute
        self.deviceMessagesPerHour = deviceMessagesPerHour
    }

    /// FCM's published quotas. fanout applies the Android device limits to every platform (APNs
    /// publishes none).
    public static let fcm = SendQuota(projectMessagesPerMinute: 600_000, deviceMessagesPerMinute: 240, deviceMessagesPerHour: 5000)

    /// No limit at all (load tests of the engine itself).
    public static let unlimited = SendQuota(projectMessagesPerMinute: nil, deviceMessagesPerMinute: nil, deviceMessagesPerHour: nil)
}

/// One rate limit as the generic cell rate algorithm: `count` messages per `period`, all of them
/// in a burst if the limit was idle. Its whole state is one instant, the "theoretical arrival time"
/// of the next message; a message at `now` fits while that instant is at most `period - interval`
/// ahead of `now`.
struct RateLimit: Sendable {
    /// Nanoseconds one message uses up.
    let interval: Int64
    /// How far ahead of now the arrival time may run (the burst).
    let tolerance: Int64

    /// `nil` when `count` is nil or not positive (no limit).
    init?(_ count: Int?, per period: Duration) {
        guard let count, count > 0 else { return nil }
        let nanoseconds = period.components.seconds * 1_000_000_000
        self.interval = max(1, nanoseconds / Int64(count))
        self.tolerance = nanoseconds - self.interval
    }

    /// How long until one more message fits at `now` (nanoseconds since the epoch) given arrival
    /// time `tat`; `nil` when it fits now.
    func wait(_ tat: Int64, now: Int64) -> Int64? {
        let ahead = max(tat, now) - now
        return ahead > self.tolerance ? ahead - self.tolerance : nil
    }

    /// The arrival time after one more message at `now`.
    func taking(_ tat: Int64, now: Int64) -> Int64 {
        max(tat, now) + self.interval
    }
}
