/// One thing wrong with a message: the field's path (`message.android.ttl`) and what is wrong.
public struct FieldViolation: Hashable, Sendable, CustomStringConvertible {
    public var field: String
    public var description: String

    public init(field: String, description: String) {
        self.field = field
        self.description = description
    }
}
