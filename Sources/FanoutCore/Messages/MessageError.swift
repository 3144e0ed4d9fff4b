/// A message that FCM would refuse: every violation found in one pass, in FCM's error shape.
public struct MessageError: Error, Sendable, CustomStringConvertible {
    public var violations: [FieldViolation]

    public init(violations: [FieldViolation]) {
        self.violations = violations
    }

    /// The summary FCM puts in `error.message`.
    public var message: String {
        if self.violations.count == 1, let only = self.violations.first {
            return "Invalid value at '\(only.field)': \(only.description)"
        }
        return "Request contains an invalid argument (\(self.violations.count) violations)."
    }

    public var description: String { self.message }

    /// `{"error":{"code":400,"status":"INVALID_ARGUMENT","message":"...","details":[{"field":...,"description":...}]}}`
    package var json: JSONValue {
        let details = self.violations.map { violation in
            JSONValue.object(
                JSONObject([
                    .init(key: "field", value: .string(violation.field)),
                    .init(key: "description", value: .string(violation.description)),
                ])
            )
        }
        return .object(
            JSONObject([
                .init(
                    key: "error",
                    value: .object(
                        JSONObject([
                            .init(key: "code", value: .number(JSONNumber(text: "400"))),
                            .init(key: "status", value: .string("INVALID_ARGUMENT")),
                            .init(key: "message", value: .string(self.message)),
                            .init(key: "details", value: .array(details)),
                        ])
                    )
                )
            ])
        )
    }
}

extension FanoutError {
    /// `INVALID_ARGUMENT` carrying a message's violations.
    public init(_ error: MessageError) {
        self.init(.invalidArgument, error.message, field: error.violations.first?.field)
        self.violations = error.violations
    }
}
