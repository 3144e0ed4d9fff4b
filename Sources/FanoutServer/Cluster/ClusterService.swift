package import FanoutCluster
internal import FanoutCore
package import FanoutModel
internal import FanoutWire
package import Logging
internal import NIOPosix
package import ServiceLifecycle

/// A cluster node's loop (docs/scale-out.md), run as a service next to its `FanoutServer`: a turn
/// every third of the lease (announce the node, renew, take and hand on shards), in between the
/// followers catching up every `catchUpInterval`, and after each turn the node answers the
/// requests of exactly the shards it owns. The calls block on NATS, so they run on NIO's thread
/// pool. On shutdown (after the server's, so list it first in the service group) it stops
/// answering, hands its shards on and closes their engines.
package final class ClusterService: Service, Sendable {
    package let node: ClusterNode
    let router: ClusterRouter
    private let catchUpInterval: Duration
    private let logger: Logger

    package init(
        node: ClusterNode,
        maximumPayloadSize: Int = FrameHeader.defaultMaximumPayloadSize,
        catchUpInterval: Duration = .milliseconds(100),
        logger: Logger = Logger(label: "fanoutd")
    ) throws(FanoutError) {
        self.node = node
        self.router = ClusterRouter(try ShardRequests(node: node, maximumPayloadSize: maximumPayloadSize))
        self.catchUpInterval = catchUpInterval
        self.logger = logger
    }

    package func run() async throws {
        let node = self.node
        let pool = NIOThreadPool.singleton
        await cancelWhenGracefulShutdown {
            var nextTurn = ContinuousClock.now
            while !Task.isCancelled {
                do {
                    if ContinuousClock.now >= nextTurn {
                        nextTurn = ContinuousClock.now + node.lease / 3
                        let failures = try await pool.runIfActive { try node.turn() }
                        self.router.shards.followOwnership()
                        self.router.refreshConsumers()
                        for (shard, error) in failures.sorted(by: { $0.key < $1.key }) {
                            self.logger.warning("cluster: shard \(shard)'s turn failed: \(error)")
                        }
                    } else {
                        let failures = try await pool.runIfActive { node.catchUp() }
                        for (shard, error) in failures.sorted(by: { $0.key < $1.key }) {
                            self.logger.warning("cluster: shard \(shard) could not catch up: \(error)")
                        }
                    }
                } catch {
                    self.logger.warning("cluster: the node's turn failed: \(error)")
                }
                try? await Task.sleep(for: self.catchUpInterval)
            }
        }
        self.router.shards.stopAnswering()
        try await pool.runIfActive { node.close() }
    }
}
