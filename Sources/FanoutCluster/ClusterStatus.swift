package import FanoutCore

/// What one node says of its shards when it announces itself (the value of its entry in the
/// members bucket, rewritten every turn): per shard, that it owns it, or how far it has applied
/// its stream. One line per shard: `<shard> owner`, or `<shard> follower <applied sequence>`.
struct NodeProgress: Hashable, Sendable {
    /// Per shard: nil while the node owns it, else the last stream sequence it applied.
    var applied: [Int: UInt64?]

    init(_ served: [ClusterNode.ServedShard]) {
        self.applied = Dictionary(uniqueKeysWithValues: served.enumerated().map { ($0.offset, $0.element.isOwner ? nil : $0.element.appliedSequence ?? 0) })
    }

    /// Reads an announcement; lines that do not parse are left out.
    init(decoding text: String) {
        var applied: [Int: UInt64?] = [:]
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count >= 2, let shard = Int(fields[0]) else { continue }
            if fields[1] == "owner" {
                applied[shard] = .some(nil)
            } else if fields[1] == "follower", fields.count == 3, let sequence = UInt64(fields[2]) {
                applied[shard] = sequence
            }
        }
        self.applied = applied
    }

    /// Every member's announcement in the members bucket, by node (the members listed as a
    /// turn lists them, waiting JetStream's usual 5 s at most).
    static func readAll(from members: KeyValueBucket) throws(FanoutError) -> [String: NodeProgress] {
        var progress: [String: NodeProgress] = [:]
        for node in try members.writtenKeys(timeout: .seconds(5)) {
            if let entry = try members.entry(node) { progress[node] = NodeProgress(decoding: String(decoding: entry.value, as: UTF8.self)) }
        }
        return progress
    }

    var encoded: String {
        self.applied.sorted { $0.key < $1.key }.map { shard, sequence in
            sequence.map { "\(shard) follower \($0)" } ?? "\(shard) owner"
        }.joined(separator: "\n")
    }
}

/// A cluster as NATS holds it (docs/scale-out.md), for `fanout cluster status`: the shard count,
/// the members, and per shard its owner, its stream's length and how far each node has applied
/// it (as of each node's last turn, a third of a lease ago at most).
package struct ClusterStatus: Sendable {
    package struct Shard: Sendable {
        package var shard: Int
        /// The node holding the shard's lease; nil while nobody does (a hand-over, a failover).
        package var owner: String?
        /// The stream's last sequence.
        package var streamEnd: UInt64
        /// The stream's first sequence it still holds (above 1 once it was purged).
        package var streamStart: UInt64 = 1
        /// The LSN of the shard's newest published snapshot; nil while none is.
        package var snapshotLSN: UInt64?
        /// Per member: nil when it says it owns the shard, else the sequence it applied.
        package var applied: [String: UInt64?]
        /// The member the placement gives the shard to (`ShardPlacement`, or its pin while the
        /// pinned node is a member); the owner hands the shard to it when they differ.
        package var placedOn: String?
        /// The node an operator pinned the shard to (`fanout cluster pin`), if any.
        package var pinnedTo: String?

        /// How many messages `node` is behind the stream's end; nil for the owner or a node that
        /// said nothing of the shard.
        package func lag(of node: String) -> UInt64? {
            guard let applied = self.applied[node], let sequence = applied else { return nil }
            return self.streamEnd - min(sequence, self.streamEnd)
        }
    }

    package var shardCount: Int
    package var nodes: [String]
    package var shards: [Shard]

    /// The largest lag of any follower of any shard, in messages (0 when every follower is at its
    /// stream's end, as of the nodes' last turns).
    package var maximumLag: UInt64 {
        self.shards.flatMap { shard in self.nodes.compactMap { shard.lag(of: $0) } }.max() ?? 0
    }

    /// Whether every shard is owned by the member the placement gives it to: no hand-over is
    /// due, so no request waits for one (until a member comes or goes).
    package var isSettled: Bool {
        self.shards.allSatisfy { $0.owner != nil && $0.owner == $0.placedOn }
    }

    /// Reads the cluster at `urls`.
    /// - Throws: `FAILED_PRECONDITION` when there is no cluster there, `UNAVAILABLE` when NATS
    ///   does not answer.
    package static func read(urls: String) throws(FanoutError) -> ClusterStatus {
        let jetStream = try JetStream(urls: urls)
        guard let layout = try? KeyValueBucket(jetStream, existing: ClusterNode.layoutBucket), let entry = try layout.entry("shards"),
            let count = Int(String(decoding: entry.value, as: UTF8.self))
        else {
            throw FanoutError(.failedPrecondition, "no cluster exists at \(urls)")
        }
        let members = try KeyValueBucket(jetStream, existing: ClusterNode.membersBucket)
        let progress = try NodeProgress.readAll(from: members)
        let ownership = try KeyValueBucket(jetStream, existing: ShardOwnership.bucket)
        let pins = try ShardPins.read(from: layout).pins
        let memberNames = Set(progress.keys)
        var shards: [Shard] = []
        for shard in 0..<count {
            let owner = try ownership.entry("shard-\(shard)").flatMap { $0.value.isEmpty ? nil : String(decoding: $0.value, as: UTF8.self) }
            let stream = try jetStream.state(of: ShardStream(shard: shard).name)
            let snapshot = try layout.entry(ShardSnapshotStore.key(shard)).flatMap { ShardSnapshotStore.Entry(decoding: $0.value) }
            var applied: [String: UInt64?] = [:]
            for (node, reported) in progress { if let sequence = reported.applied[shard] { applied[node] = sequence } }
            let placedOn = pins.owner(of: shard, among: memberNames)
            var status = Shard(shard: shard, owner: owner, streamEnd: stream.lastSequence, applied: applied, placedOn: placedOn, pinnedTo: pins.nodes[shard])
            status.streamStart = max(stream.firstSequence, 1)
            status.snapshotLSN = snapshot?.lsn
            shards.append(status)
        }
        return ClusterStatus(shardCount: count, nodes: progress.keys.sorted(), shards: shards)
    }

    /// The status as a table: a line per shard (its owner, the sequences its stream holds, its
    /// newest published snapshot's LSN), a column per node (`owns`, or the sequence it applied and
    /// its lag).
    package var table: String {
        var lines = [
            "cluster: \(self.shardCount) shards; nodes: \(self.nodes.isEmpty ? "none" : self.nodes.joined(separator: ", "))",
            self.isSettled ? "every shard is on the node placed for it" : "shards are moving (owner -> the node placed for it)",
        ]
        let header = ["shard", "owner", "stream", "snapshot"] + self.nodes
        var rows = [header]
        for shard in self.shards {
            let owner = shard.owner ?? "(none)"
            let moving = shard.placedOn.map { $0 == shard.owner ? "" : " -> \($0)" } ?? ""
            let pinned = shard.pinnedTo.map { " (pinned to \($0))" } ?? ""
            var row = ["\(shard.shard)", owner + moving + pinned, "\(shard.streamStart)-\(shard.streamEnd)", shard.snapshotLSN.map { "LSN \($0)" } ?? "-"]
            for node in self.nodes {
                switch shard.applied[node] {
                case .some(.none): row.append("owns")
                case .some(.some(let sequence)): row.append("\(sequence) (lag \(shard.lag(of: node) ?? 0))")
                case .none: row.append("-")
                }
            }
            rows.append(row)
        }
        let widths = header.indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
        for row in rows {
            lines.append(zip(row, widths).map { $0.0 + String(repeating: " ", count: $0.1 - $0.0.count) }.joined(separator: "  ").trimmingTrailingSpaces)
        }
        return lines.joined(separator: "\n")
    }
}

extension String {
    fileprivate var trimmingTrailingSpaces: String {
        var text = self
        while text.last == " " { text.removeLast() }
        return text
    }
}
