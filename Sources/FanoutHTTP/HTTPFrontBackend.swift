public import FanoutCore

/// What the HTTP front's FCM routes (send, topic management, `iid/info`, `/readyz`) ask of what
/// serves them: one engine (`Engine` conforms), or a cluster node, which routes each call to the
/// owners of the shards it touches (docs/scale-out.md). Errors are `FanoutError`s, which the front
/// answers in Google's shape.
public protocol HTTPFrontBackend: Sendable {
    /// FCM's send of `body` (`{"message": ..., "validate_only": ...}`) in `project`, answered once
    /// durable: the message's id (`projects/{project}/messages/{id}`) and, for a send to tokens or
    /// FIDs, each recipient's result (the front answers a single recipient's refusal, as FCM does).
    func sendMessage(_ body: [UInt8], in project: ProjectID) async throws(FanoutError) -> (messageID: String, recipients: [RecipientResult])

    /// Subscribes up to 1000 installations to `topic`: one result per installation, in order.
    func subscribe(_ registrations: [RegistrationAddress], to topic: TopicName, in project: ProjectID) async throws(FanoutError) -> [BatchItemResult]

    /// Unsubscribes up to 1000 installations from `topic`: one result per installation, in order.
    func unsubscribe(_ registrations: [RegistrationAddress], from topic: TopicName, in project: ProjectID) async throws(FanoutError) -> [BatchItemResult]

    /// The installation `address` names.
    func installation(_ address: RegistrationAddress, in project: ProjectID) async throws(FanoutError) -> Installation

    /// The topics the installation `address` names is subscribed to, sorted.
    func topics(of address: RegistrationAddress, in project: ProjectID) async throws(FanoutError) -> [TopicName]

    /// Whether changes are accepted (`/readyz`): false once a log refuses them.
    var isReady: Bool { get }
}

extension Engine: HTTPFrontBackend {
    public func sendMessage(_ body: [UInt8], in project: ProjectID) async throws(FanoutError) -> (messageID: String, recipients: [RecipientResult]) {
        let sent = try await MessagesSend.apply(body, in: project, engine: self).durable()
        return (sent.messageID, sent.recipients)
    }

    public var isReady: Bool { self.logFailure == nil }
}
