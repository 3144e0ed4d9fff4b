/// One thing wrong with a message: the field's path (`message.android.ttl`) and what is wrong.
public struct FieldViolation: Hashable, Sendable, CustomStringConvertible {
    public var field: String
    public var description: String

    public init(field: String, description: String) {
        self.field = field
        self.description = description
    }
}

/// Violations collected in one pass over a message.
struct Violations {
    private(set) var all: [FieldViolation] = []

    var isEmpty: Bool { self.all.isEmpty }

    mutating func add(_ field: String, _ description: String) {
        self.all.append(FieldViolation(field: field, description: description))
    }
}
