package import FanoutCore

/// Shards an operator placed on a node by hand (`fanout cluster pin`), overriding
/// `ShardPlacement` while that node is a member (docs/scale-out.md, "Moving shards"). Kept as one
/// entry, `pins`, in the cluster's layout bucket: a line `<shard> <node>` per pinned shard.
package struct ShardPins: Hashable, Sendable {
    /// The node each pinned shard is placed on.
    package var nodes: [Int: String] = [:]

    static let key = "pins"

    package init(_ nodes: [Int: String] = [:]) {
        self.nodes = nodes
    }

    /// Reads the entry; lines that do not parse are left out.
    init(decoding text: String) {
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            if fields.count == 2, let shard = Int(fields[0]), ClusterNode.isValidName(String(fields[1])) { self.nodes[shard] = String(fields[1]) }
        }
    }

    var encoded: [UInt8] {
        Array(self.nodes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: "\n").utf8)
    }

    /// The node that should own `shard` among `members`: its pinned node while that one is a
    /// member, else the placement's.
    package func owner(of shard: Int, among members: Set<String>) -> String? {
        if let node = self.nodes[shard], members.contains(node) { return node }
        return ShardPlacement.preferredOwner(of: shard, among: members)
    }

    /// The pins in `layout` and the entry's revision (nil: no shard was ever pinned).
    static func read(from layout: KeyValueBucket) throws(FanoutError) -> (pins: ShardPins, revision: UInt64?) {
        guard let entry = try layout.entry(Self.key) else { return (ShardPins(), nil) }
        return (ShardPins(decoding: String(decoding: entry.value, as: UTF8.self)), entry.revision)
    }

    /// Pins `shard` of the cluster at `urls` to `node`, or unpins it (nil), with compare-and-set
    /// against other operators' changes; returns the pins now.
    /// - Throws: `INVALID_ARGUMENT` for a shard the cluster does not have or a bad node name;
    ///   `FAILED_PRECONDITION` when there is no cluster there; `UNAVAILABLE` when NATS does not answer.
    package static func pin(_ shard: Int, to node: String?, urls: String) throws(FanoutError) -> ShardPins {
        if let node, !ClusterNode.isValidName(node) {
            throw FanoutError(.invalidArgument, "a node's name is 1 to 64 characters of A-Z, a-z, 0-9, _ and -", field: "node")
        }
        let jetStream = try JetStream(urls: urls)
        guard let layout = try? KeyValueBucket(jetStream, existing: ClusterNode.layoutBucket), let entry = try layout.entry("shards"),
            let count = Int(String(decoding: entry.value, as: UTF8.self))
        else {
            throw FanoutError(.failedPrecondition, "no cluster exists at \(urls)")
        }
        guard (0..<count).contains(shard) else {
            throw FanoutError(.invalidArgument, "the cluster has shards 0 to \(count - 1), not \(shard)", field: "shard")
        }
        for _ in 0..<10 {
            var (pins, revision) = try Self.read(from: layout)
            pins.nodes[shard] = node
            let written = if let revision { try layout.update(Self.key, pins.encoded, at: revision) } else { try layout.create(Self.key, pins.encoded) }
            if written != nil { return pins }
        }
        throw FanoutError(.unavailable, "the pins kept changing under this change: try again")
    }
}
