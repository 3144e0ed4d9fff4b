/// What `fanout-load` can run. Each scenario first runs what it needs (a send needs
/// installations and subscriptions), and reports those phases too.
public enum LoadScenario: String, CaseIterable, Sendable, Codable {
    case register
    /// Registrations 1000 per request (after the unbatched ones).
    case registerBatch = "register-batch"
    case subscribe
    case sendTopic = "send-topic"
    case sendCondition = "send-condition"
    case mixed
    case recover
    /// Round trips one at a time on one connection: PING, then a read of one installation.
    case latency
    /// Idle connections held open at once: the server's memory per connection, and a fresh one's
    /// round trips meanwhile.
    case connections
    /// FCM v1 sends to tokens over the binary protocol, then over the HTTP front.
    case httpSend = "http-send"
    /// What replication costs a change (issue 22): registrations on an engine embedded in the
    /// harness on its data directory, then on a shard owner's engine that also publishes each
    /// change to JetStream (a nats-server started here).
    case replication
    /// What a cluster costs a change (issue 22), through fanoutd: registrations and subscriptions
    /// on one fanoutd, then through one node of three `fanoutd --cluster` nodes (16 shards, one
    /// nats-server started here): a third of the changes are the node's own shards, the others
    /// go to their owners over NATS.
    case cluster

    /// Whether the scenario registers the workload's `batchInstallations`, whose data is then
    /// made before the first phase.
    package var registersBatches: Bool { self == .registerBatch }

    package var needsSubscriptions: Bool {
        self != .register && self != .registerBatch && self != .latency && self != .connections && self != .httpSend && self != .replication
            && self != .cluster
    }
}
