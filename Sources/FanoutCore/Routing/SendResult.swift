/// What a send did: the message's id, how many installations it reached, and for token, FID and
/// multicast targets one result per recipient in input order.
public struct SendResult: Sendable {
    /// The id FCM returns for `validate_only` sends, where nothing is sent.
    public static let validateOnlyMessageID = "fake_message_id"

    /// `projects/{project}/messages/{sequence}`.
    public var messageID: String
    /// The message's sequence number in its project (0 for a `validateOnly` send).
    public var sequence: UInt64
    /// The installations the target resolved to.
    public var audience: Int
    /// Deliveries put in mailboxes (or handed straight to a consumer, for TTL 0).
    public var enqueued: Int
    /// For token, FID and multicast targets, in input order: `ok`, `UNREGISTERED` (unknown, deleted
    /// or rotated-away token or FID) or `INVALID_ARGUMENT` (the recipient's platform payload is over
    /// its limit). Empty for topic, condition and user targets.
    public var recipients: [BatchItemResult]

    static func messageID(project: ProjectID, sequence: UInt64) -> String {
        "projects/\(project)/messages/\(sequence)"
    }
}
