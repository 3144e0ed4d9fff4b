/// What `fanout-load` can run. Each scenario first runs what it needs (a send needs
/// installations and subscriptions), and reports those phases too.
public enum LoadScenario: String, CaseIterable, Sendable, Codable {
    case register
    case subscribe
    case sendTopic = "send-topic"
    case sendCondition = "send-condition"
    case mixed
    case recover

    var needsSubscriptions: Bool {
        self != .register
    }
}
