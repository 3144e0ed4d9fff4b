import ArgumentParser
import FanoutCluster
import FanoutCore

struct ClusterCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cluster",
        abstract: "Look at a cluster of fanoutd nodes, and move shards by hand (docs/scale-out.md).",
        subcommands: [Status.self, Pin.self, Unpin.self]
    )

    struct Status: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The nodes, and per shard its owner, its stream's length and how far each node has applied it.",
            discussion: """
                Read from the cluster's NATS servers, not from a node: it works while nodes are down. \
                `stream` is the range of sequences the shard's stream holds (purged below the first, up to \
                its owner's last published snapshot), `snapshot` that snapshot's LSN. \
                A node's column says `owns`, or the last stream sequence it applied and its lag behind \
                the stream's end in messages (as of the node's last turn, a third of a lease ago at most); \
                `-` when the node said nothing of the shard. An owner of `(none)` is a shard between two \
                owners (a hand-over or a failover).
                """
        )

        @Option(help: "The cluster's NATS servers, nats://HOST:PORT (comma-separated), as given to fanoutd --cluster.")
        var cluster = "nats://127.0.0.1:4222"

        func run() throws {
            print(try ClusterStatus.read(urls: self.cluster).table)
        }
    }

    struct Pin: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Place a shard on a node by hand: its owner hands it to that node while the node is a member.",
            discussion: """
                Written to the cluster's NATS servers; the nodes read it at their next turn. A pin to a \
                node that is not a member waits for it to join; while the pinned node is away, the shard \
                is placed as if unpinned. `fanout cluster status` shows the pin and the move.
                """
        )

        @Option(help: "The cluster's NATS servers, nats://HOST:PORT (comma-separated), as given to fanoutd --cluster.")
        var cluster = "nats://127.0.0.1:4222"
        @Argument(help: "The shard's number.")
        var shard: Int
        @Argument(help: "The node's name (as given to fanoutd --node).")
        var node: String

        func run() throws {
            _ = try ShardPins.pin(self.shard, to: self.node, urls: self.cluster)
            print("shard \(self.shard) pinned to \(self.node)")
        }
    }

    struct Unpin: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Give a pinned shard back to the placement (rendezvous hashing over the members)."
        )

        @Option(help: "The cluster's NATS servers, nats://HOST:PORT (comma-separated), as given to fanoutd --cluster.")
        var cluster = "nats://127.0.0.1:4222"
        @Argument(help: "The shard's number.")
        var shard: Int

        func run() throws {
            _ = try ShardPins.pin(self.shard, to: nil, urls: self.cluster)
            print("shard \(self.shard) placed as the members' placement says")
        }
    }
}
