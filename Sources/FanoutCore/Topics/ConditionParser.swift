/// A recursive-descent parser over the UTF-8 bytes of a condition. Errors name the byte offset;
/// they never echo the input, which is caller-controlled.
struct ConditionParser {
    private let bytes: [UInt8]
    private var position = 0
    private var atoms = 0
    private var depth = 0

    init(_ expression: String) {
        self.bytes = Array(expression.utf8.prefix(Condition.maximumLength + 1))
    }

    mutating func parse() throws(FanoutError) -> Condition {
        guard self.bytes.count <= Condition.maximumLength else {
            throw Self.invalid("longer than \(Condition.maximumLength) bytes")
        }
        self.skipSpaces()
        guard self.position < self.bytes.count else { throw Self.invalid("empty expression") }
        let condition = try self.parseExpression()
        self.skipSpaces()
        guard self.position == self.bytes.count else {
            throw self.invalidHere("unexpected character (an operator && or || was expected)")
        }
        return condition
    }

    // expr := unary ( ( "&&" | "||" ) unary )*   -- folded left to right
    private mutating func parseExpression() throws(FanoutError) -> Condition {
        var result = try self.parseUnary()
        while true {
            self.skipSpaces()
            if self.consume("&&") {
                result = .and(result, try self.parseUnary())
            } else if self.consume("||") {
                result = .or(result, try self.parseUnary())
            } else {
                return result
            }
        }
    }

    // unary := "!" unary | "(" expr ")" | atom
    private mutating func parseUnary() throws(FanoutError) -> Condition {
        self.skipSpaces()
        guard self.position < self.bytes.count else { throw self.invalidHere("a topic atom was expected") }
        switch self.bytes[self.position] {
        case UInt8(ascii: "!"):
            self.position += 1
            try self.descend()
            defer { self.depth -= 1 }
            return .not(try self.parseUnary())
        case UInt8(ascii: "("):
            self.position += 1
            try self.descend()
            defer { self.depth -= 1 }
            let inner = try self.parseExpression()
            self.skipSpaces()
            guard self.consume(")") else { throw self.invalidHere("')' was expected") }
            return inner
        case UInt8(ascii: "'"), UInt8(ascii: "\""):
            return try self.parseAtom()
        default:
            throw self.invalidHere("a quoted topic name, '!' or '(' was expected")
        }
    }

    // atom := quote TOPIC quote "in" "topics"
    private mutating func parseAtom() throws(FanoutError) -> Condition {
        let quote = self.bytes[self.position]
        self.position += 1
        let start = self.position
        while self.position < self.bytes.count && self.bytes[self.position] != quote {
            self.position += 1
        }
        guard self.position < self.bytes.count else { throw Self.invalid("unterminated topic name at byte \(start - 1)") }
        let nameBytes = self.bytes[start..<self.position]
        guard TopicName.isValid(nameBytes), let name = TopicName(String(decoding: nameBytes, as: UTF8.self)),
            name.value.utf8.count == nameBytes.count
        else {
            throw Self.invalid("malformed topic name at byte \(start)")
        }
        self.position += 1
        self.skipSpaces()
        guard self.consumeWord("in") else { throw self.invalidHere("'in topics' was expected") }
        self.skipSpaces()
        guard self.consumeWord("topics") else { throw self.invalidHere("'topics' was expected") }
        self.atoms += 1
        guard self.atoms <= Condition.maximumAtoms else {
            throw Self.invalid("more than \(Condition.maximumAtoms) topics")
        }
        return .topic(name)
    }

    // MARK: - Lexing

    private mutating func descend() throws(FanoutError) {
        self.depth += 1
        guard self.depth <= Condition.maximumDepth else {
            throw Self.invalid("nested deeper than \(Condition.maximumDepth) levels")
        }
    }

    private mutating func skipSpaces() {
        while self.position < self.bytes.count,
            self.bytes[self.position] == UInt8(ascii: " ") || self.bytes[self.position] == UInt8(ascii: "\t")
                || self.bytes[self.position] == UInt8(ascii: "\n") || self.bytes[self.position] == UInt8(ascii: "\r")
        {
            self.position += 1
        }
    }

    private mutating func consume(_ literal: StaticString) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard self.position + count <= self.bytes.count else { return false }
        let matches = literal.withUTF8Buffer { expected in
            expected.indices.allSatisfy { self.bytes[self.position + $0] == expected[$0] }
        }
        if matches { self.position += count }
        return matches
    }

    /// Consumes `word` only when it is not followed by another letter (`intopics` is not `in topics`).
    private mutating func consumeWord(_ word: StaticString) -> Bool {
        let start = self.position
        guard self.consume(word) else { return false }
        if self.position < self.bytes.count, ASCII.isAlphanumeric(self.bytes[self.position]) {
            self.position = start
            return false
        }
        return true
    }

    // MARK: - Errors

    private static func invalid(_ detail: String) -> FanoutError {
        .invalidArgument("Invalid condition expression provided. (\(detail))", field: "condition")
    }

    private func invalidHere(_ detail: String) -> FanoutError {
        Self.invalid("\(detail) at byte \(self.position)")
    }
}
