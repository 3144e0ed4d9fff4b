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
        // Not `FanoutError(self)`: FCM's object for a refused message names no single field.
        var error = FanoutError(.invalidArgument, self.message)
        error.violations = self.violations
        return error.json
    }
}

extension FanoutError {
    /// `INVALID_ARGUMENT` carrying a message's violations.
    public init(_ error: MessageError) {
        self.init(.invalidArgument, error.message, field: error.violations.first?.field)
        self.violations = error.violations
    }

    /// FCM's error object: `{"error":{"code":HTTP status,"status","message","field","details":[violations]}}`
    /// (`field` only when there is one).
    package var json: JSONValue {
        var members: [JSONObject.Member] = [
            .init(key: "code", value: .number(JSONNumber(self.code.httpStatus))),
            .init(key: "status", value: .string(self.code.name)),
            .init(key: "message", value: .string(self.message)),
        ]
        if let field = self.field { members.append(.init(key: "field", value: .string(field))) }
        members.append(.init(key: "details", value: .array(self.violations.map {
            .object(JSONObject([.init(key: "field", value: .string($0.field)), .init(key: "description", value: .string($0.description))]))
        })))
        return .object(JSONObject([.init(key: "error", value: .object(JSONObject(members)))]))
    }
}
