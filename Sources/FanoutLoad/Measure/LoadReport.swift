import Foundation

/// Everything a run measured, printed as tables or as JSON.
public struct LoadReport: Codable, Sendable {
    public var seed: UInt64
    public var installations: Int
    public var topics: Int
    public var subscriptions: Int
    public var durability: String
    public var concurrency: Int
    public var connections: Int
    /// The fanoutd the harness started: its path and the first 12 hex digits of its SHA-256, so
    /// that a report says which build it measured (nil when the run used a running server).
    public var fanoutd: String?
    /// With `compare`: the system that ran its phases first, one per round in the order the
    /// rounds ran (the rounds take turns, so that neither system always runs on a machine the
    /// other has just warmed or tired).
    public var firstSystems: [String] = []
    public var phases: [PhaseResult] = []
    public var memory: [MemoryFigures] = []
    public var recovery: RecoveryFigures?
    public var idleConnections: ConnectionFigures?
    public var followerLag: FollowerLagFigures?
    public var clusterJoin: ClusterJoinFigures?
    /// fanout's figures over Redis's, for the phases both ran.
    public var comparisons: [Comparison] = []
    /// With `compare --rounds N` (N > 1): each compared figure over the rounds, whose own phases,
    /// memory and comparisons are `phases`, `memory` and `comparisons`, each round's in turn.
    public var rounds: [RoundsFigure] = []

    public struct Comparison: Codable, Sendable {
        public var figure: String
        public var fanout: Double
        public var redis: Double
        /// fanout / redis.
        public var ratio: Double
        /// Whether a larger value is better (throughput) or a smaller one (latency, memory).
        public var largerIsBetter: Bool
        /// The round it was measured in, with `compare --rounds N` (N > 1).
        public var round: Int?
    }

    /// A compared figure over several rounds: the medians, and each round's ratio (a VM's speed
    /// moves between runs, so one round's ratio is only about right; the spread says how far).
    public struct RoundsFigure: Codable, Sendable {
        public var figure: String
        /// The medians of each system's figure over the rounds.
        public var fanout: Double
        public var redis: Double
        /// The median of the rounds' ratios (each fanout / redis within its own round).
        public var ratio: Double
        /// Each round's ratio, in the order the rounds ran.
        public var ratios: [Double]
        public var largerIsBetter: Bool
    }

    init(workload: LoadWorkload, durability: String, options: LoadOptions) {
        self.seed = workload.seed
        self.installations = workload.installations
        self.topics = workload.topics
        self.subscriptions = workload.subscriptionCount
        self.durability = durability
        self.concurrency = options.concurrency
        self.connections = options.connections
    }

    mutating func add(_ session: LoadSession) {
        self.phases += session.results
        if let memory = session.memory {
            self.memory.append(memory)
        }
    }

    /// Pairs the phases both systems ran.
    mutating func compare() {
        self.comparisons = []
        for fanout in self.phases where fanout.system == "fanout" {
            // Deliveries taken and acknowledged, against the rate at which Redis merely reads the
            // same audience (issue 18's target for deliveries).
            if fanout.phase.hasSuffix(" delivered"), let redis = self.phases.first(where: { $0.system == "redis" && "\($0.phase) delivered" == fanout.phase }) {
                self.comparisons.append(Comparison(
                    figure: "\(fanout.phase) deliveries/s (redis: recipients read/s)", fanout: fanout.itemsPerSecond, redis: redis.itemsPerSecond,
                    ratio: redis.itemsPerSecond == 0 ? 0 : fanout.itemsPerSecond / redis.itemsPerSecond, largerIsBetter: true
                ))
                continue
            }
            guard let redis = self.phases.first(where: { $0.system == "redis" && $0.phase == fanout.phase }) else { continue }
            func add(_ figure: String, _ a: Double, _ b: Double, larger: Bool) {
                self.comparisons.append(Comparison(figure: "\(fanout.phase) \(figure)", fanout: a, redis: b, ratio: b == 0 ? 0 : a / b, largerIsBetter: larger))
            }
            add("\(fanout.itemName)/s", fanout.itemsPerSecond, redis.itemsPerSecond, larger: true)
            add("p50 ms", Double(fanout.latency.p50) / 1000, Double(redis.latency.p50) / 1000, larger: false)
            add("p99 ms", Double(fanout.latency.p99) / 1000, Double(redis.latency.p99) / 1000, larger: false)
        }
        if let fanout = self.memory.first(where: { $0.system == "fanout" }), let redis = self.memory.first(where: { $0.system == "redis" }) {
            self.comparisons.append(Comparison(figure: "bytes per installation", fanout: fanout.perInstallation, redis: redis.perInstallation, ratio: fanout.perInstallation / redis.perInstallation, largerIsBetter: false))
            if let a = fanout.perSubscription, let b = redis.perSubscription {
                self.comparisons.append(Comparison(figure: "bytes per subscription", fanout: a, redis: b, ratio: a / b, largerIsBetter: false))
            }
            if let a = fanout.residentPerInstallation, let b = redis.residentPerInstallation, b > 0 {
                self.comparisons.append(Comparison(figure: "bytes per installation, RSS against RSS", fanout: a, redis: b, ratio: a / b, largerIsBetter: false))
            }
        }
    }

    /// The rounds of one `compare`, run one after the other, as one report: every round's phases,
    /// memory and comparisons (each with its round's number, from 1), and the medians of each
    /// figure the rounds compared (`rounds`). One round is returned as it is; none, nil.
    public init?(rounds: [LoadReport]) {
        guard let first = rounds.first else { return nil }
        self = first
        guard rounds.count > 1 else { return }
        self.phases = []
        self.memory = []
        self.comparisons = []
        self.firstSystems = rounds.flatMap(\.firstSystems)
        for (index, round) in rounds.enumerated() {
            self.phases += Self.marked(round.phases, \.round, index + 1)
            self.memory += Self.marked(round.memory, \.round, index + 1)
            self.comparisons += Self.marked(round.comparisons, \.round, index + 1)
        }
        // The figures of the first round, in its order; a figure some round lacks is left out.
        self.rounds = rounds[0].comparisons.compactMap { first in
            let each = rounds.compactMap { round in round.comparisons.first { $0.figure == first.figure } }
            guard each.count == rounds.count else { return nil }
            return RoundsFigure(
                figure: first.figure,
                fanout: Self.median(each.map(\.fanout)),
                redis: Self.median(each.map(\.redis)),
                ratio: Self.median(each.map(\.ratio)),
                ratios: each.map(\.ratio),
                largerIsBetter: first.largerIsBetter
            )
        }
    }

    /// `items`, each with its round set to `round`.
    private static func marked<Item>(_ items: [Item], _ field: WritableKeyPath<Item, Int?>, _ round: Int) -> [Item] {
        items.map { item in
            var item = item
            item[keyPath: field] = round
            return item
        }
    }

    /// The middle value (the mean of the two middle ones for an even count).
    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }

    public var json: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        guard let data = try? encoder.encode(self) else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }

    /// A phase's errors by status, and its retries: `0`, `UNAVAILABLE 2 (retried 9)`.
    private static func errors(_ phase: PhaseResult) -> String {
        let errors = phase.errors.isEmpty ? "0" : phase.errors.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        return phase.retries == 0 ? errors : "\(errors) (retried \(phase.retries))"
    }

    /// The phases, memory, recovery and comparison as aligned text tables.
    public var table: String {
        var lines: [String] = []
        lines.append("fanout-load: seed \(self.seed), \(self.installations) installations, \(self.topics) topics, \(self.subscriptions) subscriptions, durability \(self.durability), concurrency \(self.concurrency) on \(self.connections) connections")
        if let fanoutd = self.fanoutd {
            lines.append("fanoutd: \(fanoutd)")
        }
        if !self.firstSystems.isEmpty {
            lines.append("first: \(self.firstSystems.joined(separator: ", ")) (the system that ran its phases first\(self.firstSystems.count > 1 ? ", each round" : ""))")
        }
        lines.append("")
        var rows = [["system", "phase", "ops", "ops/s", "items", "items/s", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms", "errors", "server CPU", "harness CPU", "server RSS"]]
        for phase in self.phases {
            rows.append([
                phase.system, phase.phase + Self.roundMark(phase.round), String(phase.operations), Self.number(phase.operationsPerSecond),
                "\(phase.items) \(phase.itemName)", Self.number(phase.itemsPerSecond),
                Self.milliseconds(phase.latency.p50), Self.milliseconds(phase.latency.p90), Self.milliseconds(phase.latency.p99),
                Self.milliseconds(phase.latency.p999), Self.milliseconds(phase.latency.max),
                Self.errors(phase),
                phase.serverCPU.map { String(format: "%.0f%%", $0 * 100) } ?? "-",
                phase.harnessCPU.map { String(format: "%.0f%%", $0 * 100) } ?? "-",
                phase.serverResidentBytes.map { Self.bytes($0) } ?? "-",
            ])
        }
        lines += Self.align(rows)
        if !self.memory.isEmpty {
            lines.append("")
            var memoryRows = [["system", "bytes per installation", "bytes per subscription", "total"]]
            for figure in self.memory {
                memoryRows.append([
                    (figure.system == "redis" ? "redis (used_memory)" : "\(figure.system) (RSS)") + Self.roundMark(figure.round),
                    String(format: "%.0f", figure.perInstallation),
                    figure.perSubscription.map { String(format: "%.1f", $0) } ?? "-",
                    Self.bytes(figure.total),
                ])
                // fanoutd's own figure is its RSS already.
                if figure.system == "redis", let resident = figure.residentPerInstallation {
                    memoryRows.append([
                        "redis (RSS)" + Self.roundMark(figure.round), String(format: "%.0f", resident), figure.residentPerSubscription.map { String(format: "%.1f", $0) } ?? "-", "-",
                    ])
                }
            }
            lines += Self.align(memoryRows)
        }
        if let recovery = self.recovery {
            lines.append("")
            lines.append(String(format: "recover: listening after %.2f s, serving after %.2f s (%d installations, %d subscriptions)", recovery.secondsUntilListening, recovery.secondsUntilServing, recovery.installations, recovery.subscriptions))
        }
        if let held = self.idleConnections {
            lines.append("")
            lines.append(
                "connections: \(held.connections) held open, server RSS \(Self.bytes(held.residentBytesBefore)) -> \(Self.bytes(held.residentBytesAfter)), "
                    + String(format: "%.0f bytes per connection; meanwhile a fresh connection: connect and HELLO %.2f ms, PING p50 %.3f ms, p99 %.3f ms",
                        held.bytesPerConnection, held.freshConnectMilliseconds, held.freshPingP50Milliseconds, held.freshPingP99Milliseconds)
            )
        }
        if let lag = self.followerLag {
            lines.append("")
            lines.append(String(
                format: "cluster followers: lag behind the stream's end, the most over every shard and node, sampled %d times during the phases: max %llu messages, mean %.1f; every follower at its stream's end %.1f s after the phases",
                lag.samples, lag.maximumMessages, lag.meanMaximumMessages, lag.secondsUntilCaughtUp
            ))
        }
        if let join = self.clusterJoin {
            lines.append("")
            lines.append(String(
                format: "cluster join (nodes snapshot every %d s): a fourth node on a fresh directory followed every shard at its stream's end %.1f s after it started; the streams held %llu of the %llu messages they got, %d shards had a published snapshot",
                join.snapshotEverySeconds, join.secondsUntilFollowing, join.streamMessagesHeld, join.streamMessagesWritten, join.publishedSnapshots
            ))
        }
        if !self.comparisons.isEmpty {
            lines.append("")
            var comparisonRows = [["figure", "fanout", "redis", "fanout/redis", ""]]
            for comparison in self.comparisons {
                comparisonRows.append([
                    comparison.figure + Self.roundMark(comparison.round), Self.number(comparison.fanout), Self.number(comparison.redis),
                    String(format: "%.2f", comparison.ratio), Self.verdict(comparison.ratio, largerIsBetter: comparison.largerIsBetter),
                ])
            }
            lines += Self.align(comparisonRows)
        }
        if !self.rounds.isEmpty {
            lines.append("")
            lines.append("over \(self.rounds[0].ratios.count) rounds (medians; the verdict by the median ratio):")
            var roundsRows = [["figure", "fanout", "redis", "fanout/redis", "each round", ""]]
            for figure in self.rounds {
                roundsRows.append([
                    figure.figure, Self.number(figure.fanout), Self.number(figure.redis), String(format: "%.2f", figure.ratio),
                    figure.ratios.map { String(format: "%.2f", $0) }.joined(separator: " "), Self.verdict(figure.ratio, largerIsBetter: figure.largerIsBetter),
                ])
            }
            lines += Self.align(roundsRows)
        }
        return lines.joined(separator: "\n")
    }

    /// Which system a fanout/Redis ratio favours.
    private static func verdict(_ ratio: Double, largerIsBetter: Bool) -> String {
        (largerIsBetter ? ratio >= 1 : ratio <= 1) ? "fanout ahead" : "redis ahead"
    }

    /// " (round N)" after a figure of one of several rounds.
    private static func roundMark(_ round: Int?) -> String {
        round.map { " (round \($0))" } ?? ""
    }

    private static func align(_ rows: [[String]]) -> [String] {
        let widths = rows[0].indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
        return rows.map { row in
            row.enumerated().map { index, cell in
                index < 2 ? cell.padding(toLength: widths[index], withPad: " ", startingAt: 0) : String(repeating: " ", count: widths[index] - cell.count) + cell
            }.joined(separator: "  ")
        }
    }

    /// Three decimals under 1 (a round trip's milliseconds), two under 100, none above.
    private static func number(_ value: Double) -> String {
        value >= 100 ? String(format: "%.0f", value) : String(format: value >= 1 ? "%.2f" : "%.3f", value)
    }

    /// Three decimals under a millisecond, where round trips are.
    private static func milliseconds(_ microseconds: UInt64) -> String {
        String(format: microseconds >= 1000 ? "%.2f" : "%.3f", Double(microseconds) / 1000)
    }

    private static func bytes(_ value: Int) -> String {
        value >= 1 << 20 ? String(format: "%.1f MiB", Double(value) / 1_048_576) : String(format: "%.1f KiB", Double(value) / 1024)
    }
}

/// The `cluster` scenario's followers: how far they trailed their shards' owners, as
/// `fanout cluster status` shows it (each node reports what it applied at the end of each turn,
/// every third of the lease, so a sample may overstate a lag by a turn's worth of changes).
public struct FollowerLagFigures: Codable, Sendable {
    public var samples: Int
    /// The largest lag seen, in stream messages (each message a batch of changes its owner logged
    /// together), over every shard and follower.
    public var maximumMessages: UInt64
    /// The mean over the samples of each sample's largest lag.
    public var meanMaximumMessages: Double
    /// From the end of the phases until every follower reported its streams applied to their end.
    public var secondsUntilCaughtUp: Double
}

/// The `cluster` scenario's fourth node, started after the phases on a fresh data directory:
/// how long until it follows every shard at its stream's end, and what the streams held then.
public struct ClusterJoinFigures: Codable, Sendable {
    /// The nodes' `--snapshot-every`.
    public var snapshotEverySeconds: Int
    /// From starting the process until its turn announced every shard applied to its stream's end.
    public var secondsUntilFollowing: Double
    /// Messages the shards' streams held when it joined (after purges), and ever got.
    public var streamMessagesHeld: UInt64
    public var streamMessagesWritten: UInt64
    /// Shards with a published snapshot when it joined.
    public var publishedSnapshots: Int
}

/// The `recover` scenario: a populated server killed with SIGKILL and started again.
public struct RecoveryFigures: Codable, Sendable {
    /// From starting the process until it listens (recovery included).
    public var secondsUntilListening: Double
    /// Until the first PING is answered.
    public var secondsUntilServing: Double
    public var installations: Int
    public var subscriptions: Int
    public var residentBytes: Int?
}
