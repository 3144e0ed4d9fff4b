/// The one error type of the fanout engine.
///
/// `code` is an FCM-style canonical status (`INVALID_ARGUMENT`, `NOT_FOUND`, ...); `field` names the
/// input that was wrong (`topic`, `registrations[3]`, `message.android.ttl`) when there is one.
/// Messages never contain registration tokens or payload bytes. Equality compares `code` and `field`.
public struct FanoutError: Error, Hashable, Sendable, CustomStringConvertible {
    /// An FCM-style status code. A struct over a private enum, so that new codes are not source-breaking.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Wrapped: String, Hashable, Sendable {
            case invalidArgument = "INVALID_ARGUMENT"
            case notFound = "NOT_FOUND"
            case unregistered = "UNREGISTERED"
            case alreadyExists = "ALREADY_EXISTS"
            case tooManyTopics = "TOO_MANY_TOPICS"
            case resourceExhausted = "RESOURCE_EXHAUSTED"
            case failedPrecondition = "FAILED_PRECONDITION"
            case permissionDenied = "PERMISSION_DENIED"
            case unauthenticated = "UNAUTHENTICATED"
            case unavailable = "UNAVAILABLE"
            case `internal` = "INTERNAL"
        }

        private let wrapped: Wrapped
        private init(_ wrapped: Wrapped) { self.wrapped = wrapped }

        /// A request or one of its items is malformed.
        public static let invalidArgument = Code(.invalidArgument)
        /// The addressed entity (installation, user, project, subscription) does not exist.
        public static let notFound = Code(.notFound)
        /// The registration token or FID is no longer valid (deleted, rotated away, expired).
        public static let unregistered = Code(.unregistered)
        /// The entity to create exists already.
        public static let alreadyExists = Code(.alreadyExists)
        /// The installation is subscribed to the maximum number of topics.
        public static let tooManyTopics = Code(.tooManyTopics)
        /// A quota or a bounded buffer is exhausted.
        public static let resourceExhausted = Code(.resourceExhausted)
        /// The request is valid but the state does not allow it (for example, linking a permanent user as anonymous).
        public static let failedPrecondition = Code(.failedPrecondition)
        /// The caller may not act on that entity.
        public static let permissionDenied = Code(.permissionDenied)
        /// The caller did not authenticate.
        public static let unauthenticated = Code(.unauthenticated)
        /// The engine cannot serve right now (closing, I/O failure); retry later.
        public static let unavailable = Code(.unavailable)
        /// A bug or an unexpected failure.
        public static let `internal` = Code(.internal)

        /// The canonical spelling, as FCM writes it (`INVALID_ARGUMENT`).
        public var name: String { self.wrapped.rawValue }
        public var description: String { self.wrapped.rawValue }

        /// The HTTP status FCM answers with for this code (its error object's `code`): 400, 401,
        /// 403, 404, 409, 429, 500 or 503.
        public var httpStatus: Int {
            switch self.wrapped {
            case .invalidArgument, .tooManyTopics, .failedPrecondition: return 400
            case .unauthenticated: return 401
            case .permissionDenied: return 403
            case .notFound, .unregistered: return 404
            case .alreadyExists: return 409
            case .resourceExhausted: return 429
            case .unavailable: return 503
            case .internal: return 500
            }
        }

        /// The code for a canonical name, or `nil` for an unknown one.
        public init?(name: String) {
            guard let wrapped = Wrapped(rawValue: name) else { return nil }
            self.wrapped = wrapped
        }
    }

    public var code: Code
    public var message: String
    /// The input field the error is about, as a path (`registrations[2]`, `message.topic`), if any.
    public var field: String?
    /// For a message FCM would refuse: every violation found (`field` names the first).
    public var violations: [FieldViolation] = []
    /// For `RESOURCE_EXHAUSTED` from a quota: how long until the request would fit (HTTP's
    /// `Retry-After`).
    public var retryAfter: Duration?

    public init(_ code: Code, _ message: String, field: String? = nil) {
        self.code = code
        self.message = message
        self.field = field
    }

    public var description: String {
        if let field = self.field {
            return "\(self.code.name): \(field): \(self.message)"
        }
        return "\(self.code.name): \(self.message)"
    }

    public static func == (lhs: FanoutError, rhs: FanoutError) -> Bool {
        lhs.code == rhs.code && lhs.field == rhs.field
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.code)
        hasher.combine(self.field)
    }

    package static func invalidArgument(_ message: String, field: String? = nil) -> FanoutError {
        FanoutError(.invalidArgument, message, field: field)
    }

    package static func notFound(_ message: String, field: String? = nil) -> FanoutError {
        FanoutError(.notFound, message, field: field)
    }
}
