import ArgumentParser
import FanoutCluster
import FanoutCore

struct ClusterCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cluster",
        abstract: "Look at a cluster of fanoutd nodes (docs/scale-out.md).",
        subcommands: [Status.self]
    )

    struct Status: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The nodes, and per shard its owner, its stream's length and how far each node has applied it.",
            discussion: """
                Read from the cluster's NATS servers, not from a node: it works while nodes are down. \
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
}
