/// What a send did for one recipient of a token, FID or multicast target, in input order: `ok`,
/// or why it got no delivery, with the field it is about (`message.tokens[2]`) and a description
/// (FCM's field violation).
public enum RecipientResult: Hashable, Sendable, CustomStringConvertible {
    case ok
    /// `UNREGISTERED` (no live installation has that token or FID), `INVALID_ARGUMENT` (its
    /// platform's rendered payload is over its limit), `FAILED_PRECONDITION` (it has no
    /// registration token, or it is stale and the send skips stale installations).
    case failed(FanoutError)

    /// The status: `nil` for `ok`.
    public var code: FanoutError.Code? {
        if case .failed(let error) = self { return error.code }
        return nil
    }

    public var description: String {
        switch self {
        case .ok: return "ok"
        case .failed(let error): return error.description
        }
    }
}

/// What a send did on one platform: the rendered payload's size against its limit, and what
/// became of the recipients on that platform.
public struct PlatformSendReport: Hashable, Sendable {
    public var platform: Platform
    /// Bytes of the rendered payload (the APNs body, the Android payload, the web push payload).
    public var renderedBytes: Int
    /// The most the payload may have (APNs 4096, 5120 for VoIP; web push 4096); `nil` for none.
    public var limit: Int?
    /// Installations of this platform the target reached.
    public var audience = 0
    /// Deliveries created (or handed straight to a consumer, for TTL 0).
    public var enqueued = 0
    /// Recipients refused because the payload is over `limit` (`refusal` says so).
    public var refused = 0
    /// Recipients skipped because they have no registration token (signed out, or never gave one).
    public var skippedWithoutToken = 0
    /// Recipients skipped because they are stale and the send asked to skip stale installations.
    public var skippedStale = 0
    /// Pending deliveries of earlier messages this send replaced by collapse key.
    public var collapsed = 0
    /// Pending deliveries dropped for the "deleted messages" marker (the 101st pending message).
    public var dropped = 0
    /// TTL 0 deliveries that found no consumer ready (gone at once, as FCM's "now or never").
    public var expired = 0

    public init(platform: Platform, renderedBytes: Int, limit: Int?) {
        self.platform = platform
        self.renderedBytes = renderedBytes
        self.limit = limit
    }

    /// Why this platform's recipients are refused, if they are: the payload is over its limit.
    public var refusal: FieldViolation? {
        guard let limit = self.limit, self.renderedBytes > limit else { return nil }
        return FieldViolation(
            field: "message.\(self.platform.configName)",
            description: "Message too big: the rendered \(self.platform) payload is \(self.renderedBytes) bytes, over its limit of \(limit) bytes"
        )
    }
}

extension Platform {
    /// The message's config object for the platform: `android`, `apns` or `webpush`.
    public var configName: String {
        switch self {
        case .android: return "android"
        case .ios: return "apns"
        case .web: return "webpush"
        }
    }
}
