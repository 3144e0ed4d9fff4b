/// A parsed JSON value (not `indirect`: arrays and objects already live in heap storage, so the
/// other cases need no box). Objects keep their members in input order (rendering is deterministic and
/// duplicate keys were already rejected); numbers keep their lexeme, so nothing is rounded until a
/// field asks for an integer or a double.
package enum JSONValue: Hashable, Sendable {
    case null
    case bool(Bool)
    case number(JSONNumber)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    /// The JSON type's name, for error messages ("expected a string, got a number").
    package var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .number: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }
}

/// A JSON number as written.
package struct JSONNumber: Hashable, Sendable, CustomStringConvertible {
    /// The lexeme, e.g. `-12.5e3`.
    package let text: String

    /// A number from its lexeme (the caller writes valid JSON number syntax).
    package init(text: String) {
        self.text = text
    }

    package init(_ value: Int) {
        self.text = String(value)
    }

    /// The value as an integer, when it is one exactly (no fraction, no exponent, in range).
    package var int64: Int64? { Int64(self.text) }

    /// The value as a double (`nil` only for lexemes that overflow to infinity).
    package var double: Double? {
        guard let value = Double(self.text), value.isFinite else { return nil }
        return value
    }

    package var description: String { self.text }
}

/// A JSON object: members in input order, keys unique.
package struct JSONObject: Hashable, Sendable {
    package struct Member: Hashable, Sendable {
        package var key: String
        package var value: JSONValue

        package init(key: String, value: JSONValue) {
            self.key = key
            self.value = value
        }
    }

    package var members: [Member]

    package init(_ members: [Member] = []) {
        self.members = members
    }

    package subscript(key: String) -> JSONValue? {
        self.members.first { $0.key == key }?.value
    }
}
