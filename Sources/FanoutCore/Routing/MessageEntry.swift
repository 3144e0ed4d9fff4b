/// A message with deliveries still pending: the rendered message shared by all of them, what each
/// platform's deliveries need to know (expiry, collapse key, whether the payload fits), the slots
/// it was enqueued to (for expiry sweeps) and how many deliveries still reference it.
struct MessageEntry {
    let sequence: UInt64
    /// What the log and snapshots store of it.
    let rendered: RenderedMessage
    let expiry: PerPlatform<Int64>
    let collapseKey: PerPlatform<String?>
    /// TTL 0 (or an `apns-expiration` already past): deliver to a consumer attached now, or never.
    let isNowOrNever: PerPlatform<Bool>
    /// The slots that may hold a delivery of this message.
    var audience: SlotSet
    /// Mailbox nodes referencing this entry (deliveries and "deleted messages" markers).
    var references = 0
    /// The time of the last expiry sweep that visited it: a sweep comes back only when another
    /// platform's expiry has passed since.
    var lastSweep = Int64.min

    init(sequence: UInt64, rendered: RenderedMessage, audience: SlotSet) {
        self.sequence = sequence
        self.rendered = rendered
        self.audience = audience
        let expiry = PerPlatform { rendered.expiry(for: $0).millisecondsSinceEpoch }
        let accepted = rendered.acceptedAt.millisecondsSinceEpoch
        self.expiry = expiry
        self.collapseKey = PerPlatform { rendered.collapseKey(for: $0) }
        self.isNowOrNever = PerPlatform { expiry[$0] <= accepted }
    }

    /// Whether a delivery to `platform` is held back by the 100-pending rule's count: it is neither
    /// collapsible nor TTL 0.
    func countsTowardPendingLimit(on platform: Platform) -> Bool {
        self.collapseKey[platform] == nil && !self.isNowOrNever[platform]
    }
}

/// What the hand-out, acknowledgement and 100-pending paths read of a message at every mailbox
/// node they pass, kept beside the entries as plain values (`DeliveryState.facts`): read from a
/// `MessageEntry?` in an array, they copied the whole entry (retaining and releasing its rendered
/// message, collapse keys and audience) each time, the largest item of the server's profile while
/// consumers drained.
struct MessageFacts {
    let sequence: UInt64
    let expiry: PerPlatform<Int64>
    let countsTowardPendingLimit: PerPlatform<Bool>

    init(_ entry: MessageEntry) {
        self.sequence = entry.sequence
        self.expiry = entry.expiry
        self.countsTowardPendingLimit = PerPlatform { entry.countsTowardPendingLimit(on: $0) }
    }
}

/// One value per platform, stored inline.
struct PerPlatform<Value> {
    var android: Value
    var ios: Value
    var web: Value

    init(_ make: (Platform) -> Value) {
        self.android = make(.android)
        self.ios = make(.ios)
        self.web = make(.web)
    }

    subscript(platform: Platform) -> Value {
        get {
            switch platform {
            case .android: return self.android
            case .ios: return self.ios
            case .web: return self.web
            }
        }
        // In place, so that mutating a stored collection through the subscript does not copy it.
        _modify {
            switch platform {
            case .android: yield &self.android
            case .ios: yield &self.ios
            case .web: yield &self.web
            }
        }
    }
}

extension PerPlatform: Sendable where Value: Sendable {}
