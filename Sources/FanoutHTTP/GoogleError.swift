internal import FanoutCore

/// An error in Google's JSON shape, as FCM's HTTP v1 API answers (fcm-rules.md section 5):
/// `{"error":{"code":HTTP status,"message","status":canonical code,"details":[FcmError, BadRequest]}}`.
/// firebase-admin reads `details[].errorCode` of the `google.firebase.fcm.v1.FcmError` detail to
/// pick its exception (`UnregisteredError`, `QuotaExceededError`, ...).
enum GoogleError {
    static let fcmErrorType = "type.googleapis.com/google.firebase.fcm.v1.FcmError"
    static let badRequestType = "type.googleapis.com/google.rpc.BadRequest"
    static let quotaFailureType = "type.googleapis.com/google.rpc.QuotaFailure"

    /// The canonical status FCM sends with each of the engine's codes.
    static func status(of code: FanoutError.Code) -> String {
        switch code {
        case .unregistered: return "NOT_FOUND"
        case .tooManyTopics: return "INVALID_ARGUMENT"
        default: return code.name
        }
    }

    /// FCM's `errorCode` for an engine error, when FCM has one. NOT_FOUND is `UNREGISTERED` when it
    /// is about a recipient (a token or FID), as FCM's; a missing project has no FCM code.
    static func fcmErrorCode(of error: FanoutError) -> String? {
        switch error.code {
        case .notFound:
            guard let field = error.field, field.hasPrefix("message.") || field == "registration" || field == "token" || field == "fid" else { return nil }
            return "UNREGISTERED"
        case .unregistered: return "UNREGISTERED"
        case .invalidArgument, .tooManyTopics: return "INVALID_ARGUMENT"
        case .resourceExhausted: return "QUOTA_EXCEEDED"
        case .unavailable: return "UNAVAILABLE"
        case .internal: return "INTERNAL"
        case .permissionDenied: return "SENDER_ID_MISMATCH"
        default: return nil
        }
    }

    /// The `Retry-After` header's value for `error`: FCM's 429s carry one, in whole seconds (at
    /// least 1; the quota's own wait when it says).
    static func retryAfter(_ error: FanoutError) -> String? {
        guard error.code == .resourceExhausted else { return nil }
        return String(max(1, error.retryAfter?.components.seconds ?? 1))
    }

    /// The HTTP status and the body of `error`.
    static func body(_ error: FanoutError) -> (status: Int, body: [UInt8]) {
        var details: [JSONValue] = []
        if let errorCode = Self.fcmErrorCode(of: error) {
            details.append(.object(JSONObject([
                .init(key: "@type", value: .string(Self.fcmErrorType)),
                .init(key: "errorCode", value: .string(errorCode)),
            ])))
        }
        if error.code == .resourceExhausted {
            // The quota that was hit: the device's (subject: the field that named it) or the project's.
            details.append(.object(JSONObject([
                .init(key: "@type", value: .string(Self.quotaFailureType)),
                .init(key: "violations", value: .array([
                    .object(JSONObject([
                        .init(key: "subject", value: .string(error.field ?? "project")),
                        .init(key: "description", value: .string(error.message)),
                    ])),
                ])),
            ])))
        }
        var violations = error.violations
        if violations.isEmpty, let field = error.field, error.code == .invalidArgument {
            violations = [FieldViolation(field: field, description: error.message)]
        }
        if !violations.isEmpty {
            details.append(.object(JSONObject([
                .init(key: "@type", value: .string(Self.badRequestType)),
                .init(key: "fieldViolations", value: .array(violations.map {
                    .object(JSONObject([.init(key: "field", value: .string($0.field)), .init(key: "description", value: .string($0.description))]))
                })),
            ])))
        }
        let object = JSONObject([
            .init(key: "error", value: .object(JSONObject([
                .init(key: "code", value: .number(JSONNumber(error.code.httpStatus))),
                .init(key: "message", value: .string(error.message)),
                .init(key: "status", value: .string(Self.status(of: error.code))),
                .init(key: "details", value: .array(details)),
            ]))),
        ])
        return (error.code.httpStatus, JSONWriter.encode(.object(object)))
    }
}
