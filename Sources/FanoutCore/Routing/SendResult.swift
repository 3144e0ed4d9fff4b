/// What a send did: the message's id, how many installations it reached, for token, FID and
/// multicast targets one result per recipient in input order, and per platform what became of
/// the recipients.
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
    /// For token, FID and multicast targets, in input order (`RecipientResult`). Empty for topic,
    /// condition and user targets.
    public var recipients: [RecipientResult]
    /// Android, iOS and web, in that order: each rendered payload against its limit, and the
    /// recipients on that platform queued, refused, skipped and collapsed. A `validateOnly` send
    /// reports the sizes with no recipients.
    public var platforms: [PlatformSendReport]

    static func messageID(project: ProjectID, sequence: UInt64) -> String {
        "projects/\(project)/messages/\(sequence)"
    }
}

/// How a send chooses among the installations its target reaches (not a field of FCM's JSON).
public struct SendOptions: Hashable, Sendable {
    /// Skip installations not seen for the engine's `staleAfter` (30 days by default).
    public var skipStaleInstallations: Bool

    public init(skipStaleInstallations: Bool = false) {
        self.skipStaleInstallations = skipStaleInstallations
    }
}

extension RenderedMessage {
    /// A platform's rendered size against its limit, with no recipients yet (a send's report
    /// starts from it; `refusal` says whether the platform's recipients are refused).
    public func sizeReport(for platform: Platform) -> PlatformSendReport {
        PlatformSendReport(platform: platform, renderedBytes: self.payload(for: platform).count, limit: self.limit(for: platform))
    }

    /// Each platform's `sizeReport`, android, ios and web.
    var sizeReports: [PlatformSendReport] { Platform.allCases.map(self.sizeReport(for:)) }
}
