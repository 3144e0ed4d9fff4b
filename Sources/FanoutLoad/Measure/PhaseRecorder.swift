import FanoutCore
public import Histogram

/// What one worker saw in a phase: each operation's latency in an HdrHistogram (microseconds,
/// three significant digits) and the failed ones counted by status. Workers record into their
/// own recorder; the phase merges them.
public struct PhaseRecorder: Sendable {
    public private(set) var latencies = Histogram<UInt64>(highestTrackableValue: 3_600_000_000, numberOfSignificantValueDigits: .three)
    /// Operations that succeeded.
    public private(set) var operations = 0
    /// What the operations carried: subscriptions, recipients, deliveries.
    public private(set) var items = 0
    public private(set) var errors: [String: Int] = [:]
    /// Tries sent again after `UNAVAILABLE` (each operation is counted once, by its last answer).
    public private(set) var retries = 0

    public init() {}

    public mutating func record(_ latency: Duration, items: Int = 1) {
        _ = self.latencies.record(Self.microseconds(latency))
        self.operations += 1
        self.items += items
    }

    public mutating func record(_ latency: Duration, error: any Error) {
        _ = self.latencies.record(Self.microseconds(latency))
        self.errors[Self.status(of: error), default: 0] += 1
    }

    public mutating func recordRetry() {
        self.retries += 1
    }

    public mutating func merge(_ other: PhaseRecorder) {
        self.latencies.add(other.latencies)
        self.operations += other.operations
        self.items += other.items
        self.errors.merge(other.errors, uniquingKeysWith: +)
        self.retries += other.retries
    }

    /// A status name: FCM's for a `FanoutError`, the error prefix of a Redis reply, or the
    /// kind of failure.
    static func status(of error: any Error) -> String {
        switch error {
        case let error as FanoutError: "\(error.code)"
        case let error as RedisReplyError: error.prefix
        case is RESPError: "RESP_PROTOCOL"
        case is LoadError: "HARNESS"
        default: "TRANSPORT"
        }
    }

    private static func microseconds(_ duration: Duration) -> UInt64 {
        UInt64(max(0, duration / .microseconds(1)))
    }
}

/// An error reply from Redis; `prefix` is its first word (`ERR`, `WRONGTYPE`, ...).
public struct RedisReplyError: Error, CustomStringConvertible, Sendable {
    public var message: String
    public var prefix: String { String(self.message.prefix(while: { $0 != " " })) }
    public var description: String { "Redis: \(self.message)" }
}
