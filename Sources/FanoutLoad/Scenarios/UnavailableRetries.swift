/// How a phase sends an operation again after `UNAVAILABLE` (FCM's "try again later"): after each
/// of `backoffs` in turn, then the answer counts as it is.
public struct UnavailableRetries: Sendable {
    public var backoffs: [Duration]

    public init(backoffs: [Duration]) {
        self.backoffs = backoffs
    }

    /// Every answer counts as it comes: what the registration and subscription phases measure.
    public static let none = UnavailableRetries(backoffs: [])

    /// As firebase-admin's HTTP client (urllib3, backoff factor 0.5) retries a 503: four more
    /// tries, after 0, 1, 2 and 4 s.
    public static let firebaseAdmin = UnavailableRetries(backoffs: [.zero, .seconds(1), .seconds(2), .seconds(4)])
}
