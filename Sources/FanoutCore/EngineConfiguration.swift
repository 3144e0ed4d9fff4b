/// Limits and lifetimes of an engine. The defaults are FCM's.
public struct EngineConfiguration: Sendable {
    /// An installation not seen for this long is stale: reported, and skippable by sends.
    public var staleAfter: Duration = .seconds(30 * 86_400)
    /// An installation not seen for this long expires: it is deleted with everything it owns.
    public var expireAfter: Duration = .seconds(270 * 86_400)
    /// An anonymous user with no activity (binds, device touches) for this long is cleaned up.
    public var anonymousUserLifetime: Duration = .seconds(30 * 86_400)
    /// The most topics one installation may be subscribed to (FCM: 2000; at most 65535).
    public var maximumTopicsPerInstallation = 2000
    /// The most registrations in one subscribe or unsubscribe call.
    public var maximumBatchSize = 1000
    /// How many messages a project may send, and to one device (`SendQuota`; FCM's by default).
    public var sendQuota = SendQuota.fcm
    /// How much log a durable engine keeps after a snapshot (docs/wal-format.md, "Snapshots").
    public var logRetention = LogRetention.sinceNewestSnapshot
    /// Which FIDs this engine may give an installation: a cluster shard's engine gives only FIDs
    /// of its own shard (docs/scale-out.md), and takes an offered FID of another shard as it takes
    /// a taken one (it gives a new FID). Nil: any.
    package var acceptsFID: (@Sendable (FID) -> Bool)? = nil
    /// The message sequence numbers (the ids in `projects/{project}/messages/{id}`) this engine
    /// gives: a cluster shard's engine gives those of its own residue class, so that message ids
    /// are unique across the cluster's shards. Every number by default.
    package var messageSequences = MessageSequences(offset: 0, stride: 1)

    public init() {}
}

/// Message sequence numbers congruent to `offset` modulo `stride`.
package struct MessageSequences: Hashable, Sendable {
    package let offset: UInt64
    package let stride: UInt64

    /// `stride` at least 1, `offset` below it.
    package init(offset: UInt64, stride: UInt64) {
        self.stride = max(1, stride)
        self.offset = offset % self.stride
    }

    /// The least number of the class that is at least `number`.
    package func first(atLeast number: UInt64) -> UInt64 {
        number + (self.offset + self.stride - number % self.stride) % self.stride
    }
}

/// How much log a durable engine keeps after a snapshot. Either way the newest two snapshots stay.
public enum LogRetention: Hashable, Sendable {
    /// The segments a snapshot covers are deleted once it is durable. If the newest snapshot is
    /// damaged, a repair falls back to the one before it and loses what came after that one.
    case sinceNewestSnapshot
    /// The log from the snapshot before the newest on stays too (with one snapshot, the whole log):
    /// a damaged newest snapshot then loses nothing; start-up falls back by itself. Costs the disk
    /// of one more snapshot interval of log.
    case sincePreviousSnapshot
}

extension EngineConfiguration {
    /// - Throws: `INVALID_ARGUMENT` (field `registrations`) for more than `maximum` registrations.
    package static func checkBatchSize(_ count: Int, maximum: Int) throws(FanoutError) {
        guard count <= maximum else {
            throw .invalidArgument("at most \(maximum) registrations per request, got \(count)", field: "registrations")
        }
    }
}
