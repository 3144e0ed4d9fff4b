/// One header a delivery worker sends with a delivery to its push service, as FCM would send it:
/// `apns-priority`, `apns-push-type`, `apns-expiration`, `apns-collapse-id` and `apns-topic` for
/// APNs; `TTL`, `Urgency` and `Topic` for web push (RFC 8030).
public struct DeliveryHeader: Hashable, Sendable, CustomStringConvertible {
    public var name: String
    public var value: String

    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }

    /// `name: value`.
    public var description: String { "\(self.name): \(self.value)" }
}
