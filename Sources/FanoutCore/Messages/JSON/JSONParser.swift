/// A strict, bounded, one-pass JSON parser (RFC 8259) over UTF-8 bytes.
///
/// Hostile input gets an error, never a crash or unbounded work: input size and nesting depth are
/// capped, numbers longer than 64 characters are refused, strings must be valid UTF-8 with no raw
/// control characters and no lone surrogates, and a key repeated in one object is an error naming
/// its path. Errors give the byte offset and never echo the input.
public struct JSONParser {
    /// Limits on what the parser accepts.
    public struct Limits: Sendable {
        /// The largest input, in bytes.
        public var maximumBytes = 1 << 20
        /// The deepest nesting of arrays and objects.
        public var maximumDepth = 64
        /// The longest number lexeme.
        public var maximumNumberLength = 64

        public init() {}
    }

    /// Why parsing failed, and where.
    public struct Error: Swift.Error, Hashable, Sendable, CustomStringConvertible {
        public var offset: Int
        public var reason: String
        public var description: String { "invalid JSON at byte \(self.offset): \(self.reason)" }
    }

    private let bytes: UnsafeBufferPointer<UInt8>
    private let limits: Limits
    private var position = 0
    private var depth = 0
    /// The keys leading to the current value, for duplicate-key errors (array elements are not
    /// tracked: duplicates are reported with the keys of the enclosing objects).
    private var path: [String] = []

    private init(_ bytes: UnsafeBufferPointer<UInt8>, limits: Limits) {
        self.bytes = bytes
        self.limits = limits
    }

    /// Parses one JSON document (surrounding whitespace allowed, nothing else).
    public static func parse(_ bytes: some Collection<UInt8>, limits: Limits = Limits()) throws(Error) -> JSONValue {
        guard bytes.count <= limits.maximumBytes else {
            throw Error(offset: limits.maximumBytes, reason: "the input is larger than \(limits.maximumBytes) bytes")
        }
        let array = Array(bytes)
        let result: Result<JSONValue, Error> = array.withUnsafeBufferPointer { buffer in
            var parser = JSONParser(buffer, limits: limits)
            do throws(Error) {
                parser.skipWhitespace()
                let value = try parser.parseValue()
                parser.skipWhitespace()
                guard parser.position == buffer.count else { throw parser.error("unexpected data after the JSON value") }
                return .success(value)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    // MARK: - Values

    private mutating func parseValue() throws(Error) -> JSONValue {
        guard let byte = self.peek() else { throw self.error("unexpected end of input") }
        switch byte {
        case UInt8(ascii: "{"): return .object(try self.parseObject())
        case UInt8(ascii: "["): return .array(try self.parseArray())
        case UInt8(ascii: "\""): return .string(try self.parseString())
        case UInt8(ascii: "t"): try self.expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try self.expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try self.expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try self.parseNumber())
        default: throw self.error("unexpected character")
        }
    }

    private mutating func parseObject() throws(Error) -> JSONObject {
        try self.enter()
        self.position += 1
        var members: [JSONObject.Member] = []
        var keys: Set<String> = []
        self.skipWhitespace()
        if self.peek() == UInt8(ascii: "}") {
            self.position += 1
            self.depth -= 1
            return JSONObject(members)
        }
        while true {
            self.skipWhitespace()
            guard self.peek() == UInt8(ascii: "\"") else { throw self.error("expected a string key") }
            let keyOffset = self.position
            let key = try self.parseString()
            // Small objects: a linear scan; larger ones: a set.
            let duplicate = members.count < 16 ? members.contains { $0.key == key } : !keys.insert(key).inserted
            if members.count == 15 { keys = Set(members.map(\.key) + [key]) }
            if duplicate {
                let where_ = (self.path + [key]).joined(separator: ".")
                throw Error(offset: keyOffset, reason: "duplicate key at \(where_.isEmpty ? "(root)" : where_)")
            }
            self.skipWhitespace()
            guard self.peek() == UInt8(ascii: ":") else { throw self.error("expected ':'") }
            self.position += 1
            self.skipWhitespace()
            self.path.append(key)
            let value = try self.parseValue()
            self.path.removeLast()
            members.append(JSONObject.Member(key: key, value: value))
            self.skipWhitespace()
            switch self.peek() {
            case UInt8(ascii: ","): self.position += 1
            case UInt8(ascii: "}"):
                self.position += 1
                self.depth -= 1
                return JSONObject(members)
            default: throw self.error("expected ',' or '}'")
            }
        }
    }

    private mutating func parseArray() throws(Error) -> [JSONValue] {
        try self.enter()
        self.position += 1
        var elements: [JSONValue] = []
        self.skipWhitespace()
        if self.peek() == UInt8(ascii: "]") {
            self.position += 1
            self.depth -= 1
            return elements
        }
        while true {
            self.skipWhitespace()
            elements.append(try self.parseValue())
            self.skipWhitespace()
            switch self.peek() {
            case UInt8(ascii: ","): self.position += 1
            case UInt8(ascii: "]"):
                self.position += 1
                self.depth -= 1
                return elements
            default: throw self.error("expected ',' or ']'")
            }
        }
    }

    private mutating func parseString() throws(Error) -> String {
        self.position += 1
        let start = self.position
        // Fast path: no escapes.
        while self.position < self.bytes.count {
            let byte = self.bytes[self.position]
            if byte == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: self.bytes[start..<self.position])
                guard let string = Self.string(validating: slice) else {
                    throw Error(offset: start, reason: "a string is not valid UTF-8")
                }
                self.position += 1
                return string
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw self.error("a raw control character in a string") }
            self.position += 1
        }
        // Slow path: unescape into a buffer.
        var buffer = Array(self.bytes[start..<self.position])
        while true {
            guard let byte = self.peek() else { throw Error(offset: start - 1, reason: "unterminated string") }
            if byte == UInt8(ascii: "\"") {
                self.position += 1
                guard let string = buffer.withUnsafeBufferPointer(Self.string(validating:)) else {
                    throw Error(offset: start, reason: "a string is not valid UTF-8")
                }
                return string
            }
            if byte < 0x20 { throw self.error("a raw control character in a string") }
            if byte != UInt8(ascii: "\\") {
                buffer.append(byte)
                self.position += 1
                continue
            }
            self.position += 1
            guard let escape = self.peek() else { throw Error(offset: start - 1, reason: "unterminated string") }
            self.position += 1
            switch escape {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): buffer.append(escape)
            case UInt8(ascii: "b"): buffer.append(0x08)
            case UInt8(ascii: "f"): buffer.append(0x0C)
            case UInt8(ascii: "n"): buffer.append(0x0A)
            case UInt8(ascii: "r"): buffer.append(0x0D)
            case UInt8(ascii: "t"): buffer.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try self.parseHex4()
                if (0xD800...0xDBFF).contains(scalar) {
                    guard self.peek() == UInt8(ascii: "\\"), self.peek(at: 1) == UInt8(ascii: "u") else {
                        throw self.error("a lone surrogate in a \\u escape")
                    }
                    self.position += 2
                    let low = try self.parseHex4()
                    guard (0xDC00...0xDFFF).contains(low) else { throw self.error("a lone surrogate in a \\u escape") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(scalar) {
                    throw self.error("a lone surrogate in a \\u escape")
                }
                // Valid by construction: not a surrogate, at most 0x10FFFF.
                buffer.append(contentsOf: String(Character(Unicode.Scalar(scalar)!)).utf8)
            default:
                throw self.error("an invalid escape sequence")
            }
        }
    }

    /// The string of `bytes` if they are valid UTF-8. `String(validating:)` is generic and not
    /// specialised here (it looks up type metadata on every call); `String(decoding:)` is, but it
    /// repairs invalid input, so a repair is detected by comparing the bytes back.
    private static func string(validating bytes: UnsafeBufferPointer<UInt8>) -> String? {
        var high: UInt8 = 0
        for byte in bytes { high |= byte }
        let string = String(decoding: bytes, as: UTF8.self)
        if high < 0x80 { return string }
        return string.utf8.elementsEqual(bytes) ? string : nil
    }

    private mutating func parseHex4() throws(Error) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let byte = self.peek() else { throw self.error("a truncated \\u escape") }
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: throw self.error("a \\u escape needs four hex digits")
            }
            value = value << 4 | digit
            self.position += 1
        }
        return value
    }

    private mutating func parseNumber() throws(Error) -> JSONNumber {
        let start = self.position
        func digits(_ parser: inout JSONParser) -> Int {
            var count = 0
            while let byte = parser.peek(), byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") {
                parser.position += 1
                count += 1
            }
            return count
        }
        if self.peek() == UInt8(ascii: "-") { self.position += 1 }
        if self.peek() == UInt8(ascii: "0") {
            self.position += 1
        } else if digits(&self) == 0 {
            throw self.error("a number needs digits")
        }
        if self.peek() == UInt8(ascii: ".") {
            self.position += 1
            guard digits(&self) > 0 else { throw self.error("a number needs digits after '.'") }
        }
        if self.peek() == UInt8(ascii: "e") || self.peek() == UInt8(ascii: "E") {
            self.position += 1
            if self.peek() == UInt8(ascii: "+") || self.peek() == UInt8(ascii: "-") { self.position += 1 }
            guard digits(&self) > 0 else { throw self.error("a number needs digits in its exponent") }
        }
        guard self.position - start <= self.limits.maximumNumberLength else {
            throw Error(offset: start, reason: "a number longer than \(self.limits.maximumNumberLength) characters")
        }
        return JSONNumber(text: String(decoding: UnsafeBufferPointer(rebasing: self.bytes[start..<self.position]), as: UTF8.self))
    }

    // MARK: - Helpers

    private mutating func enter() throws(Error) {
        self.depth += 1
        guard self.depth <= self.limits.maximumDepth else {
            throw self.error("nested deeper than \(self.limits.maximumDepth) levels")
        }
    }

    private mutating func expectLiteral(_ literal: StaticString) throws(Error) {
        let count = literal.utf8CodeUnitCount
        guard self.position + count <= self.bytes.count else { throw self.error("unexpected end of input") }
        let matches = literal.withUTF8Buffer { expected in
            (0..<count).allSatisfy { self.bytes[self.position + $0] == expected[$0] }
        }
        guard matches else { throw self.error("unexpected character") }
        self.position += count
    }

    private func peek(at offset: Int = 0) -> UInt8? {
        self.position + offset < self.bytes.count ? self.bytes[self.position + offset] : nil
    }

    private mutating func skipWhitespace() {
        while let byte = self.peek(),
            byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r") || byte == UInt8(ascii: "\t")
        {
            self.position += 1
        }
    }

    private func error(_ reason: String) -> Error {
        Error(offset: self.position, reason: reason)
    }
}
