/// A strict, bounded, one-pass JSON parser (RFC 8259) over UTF-8 bytes.
///
/// Hostile input gets an error, never a crash or unbounded work: input size and nesting depth are
/// capped, numbers longer than 64 characters are refused, strings must be valid UTF-8 with no raw
/// control characters and no lone surrogates, and a key repeated in one object is an error naming
/// its path. Errors give the byte offset and never echo the input.
package struct JSONParser {
    /// Limits on what the parser accepts.
    package struct Limits: Sendable {
        /// The largest input, in bytes.
        package var maximumBytes = 1 << 20
        /// The deepest nesting of arrays and objects.
        package var maximumDepth = 64
        /// The longest number lexeme.
        package var maximumNumberLength = 64

        package init() {}
    }

    /// Why parsing failed, and where.
    package struct Error: Swift.Error, Hashable, Sendable, CustomStringConvertible {
        package var offset: Int
        package var reason: String
        package var description: String { "invalid JSON at byte \(self.offset): \(self.reason)" }
    }

    private let bytes: UnsafeBufferPointer<UInt8>
    private let limits: Limits
    /// The document's entries, written in place: a value takes at least two input bytes (itself
    /// and a separator or bracket) except the last, so `bytes.count / 2 + 1` entries always suffice.
    private let entries: UnsafeMutableBufferPointer<JSONDocument.Entry>
    private var count = 0
    private var position = 0
    private var depth = 0
    /// Just past the last whitespace byte skipped: a container that began after it holds none.
    private var afterWhitespace = 0
    /// The hashes of the keys of objects past 16 members, each with its object (see `mayRepeat`).
    private var largeObjectKeys: Set<Int> = []

    private init(_ bytes: UnsafeBufferPointer<UInt8>, entries: UnsafeMutableBufferPointer<JSONDocument.Entry>, limits: Limits) {
        self.bytes = bytes
        self.entries = entries
        self.limits = limits
    }

    /// Parses one JSON document (surrounding whitespace allowed, nothing else) into a tree.
    package static func parse(_ bytes: some Collection<UInt8>, limits: Limits = Limits()) throws(Error) -> JSONValue {
        try self.withDocument(bytes, limits: limits) { $0.value(at: JSONDocument.root) }
    }

    /// Parses one JSON document into its flat form and calls `body` with it; the document is
    /// valid only during the call.
    static func withDocument<Result>(
        _ bytes: some Collection<UInt8>,
        limits: Limits = Limits(),
        _ body: (JSONDocument) -> Result
    ) throws(Error) -> Result {
        guard bytes.count <= limits.maximumBytes else {
            throw Error(offset: limits.maximumBytes, reason: "the input is larger than \(limits.maximumBytes) bytes")
        }
        return try self.withDocument(bytes as? [UInt8] ?? Array(bytes), limits: limits, body)
    }

    /// `withDocument` over an array (no conversion).
    static func withDocument<Result>(
        _ input: [UInt8],
        limits: Limits = Limits(),
        _ body: (JSONDocument) -> Result
    ) throws(Error) -> Result {
        guard input.count <= limits.maximumBytes, input.count < UInt32.max else {
            throw Error(offset: limits.maximumBytes, reason: "the input is larger than \(limits.maximumBytes) bytes")
        }
        let capacity = input.count / 2 + 1
        return try ThreadScratch.withBytes(capacity * MemoryLayout<JSONDocument.Entry>.stride) { scratch throws(Error) in
            let entries = scratch.bindMemory(to: JSONDocument.Entry.self)
            return try input.withUnsafeBufferPointer { buffer throws(Error) in
                var parser = JSONParser(buffer, entries: entries, limits: limits)
                parser.skipWhitespace()
                try parser.parseValue()
                parser.skipWhitespace()
                guard parser.position == buffer.count else { throw parser.error("unexpected data after the JSON value") }
                return body(JSONDocument(bytes: buffer, entries: UnsafeBufferPointer(rebasing: entries[..<parser.count])))
            }
        }
    }

    /// Appends an entry; returns its index.
    @discardableResult
    @inline(__always)
    private mutating func append(_ entry: JSONDocument.Entry) throws(Error) -> Int {
        // Within capacity by the bound above; checked all the same, since it guards memory.
        guard self.count < self.entries.count else { throw self.error("more values than the input can hold") }
        self.entries[self.count] = entry
        self.count += 1
        return self.count - 1
    }

    // MARK: - Values

    private mutating func parseValue() throws(Error) {
        switch self.peek() {
        case UInt8(ascii: "{"): try self.parseObject()
        case UInt8(ascii: "["): try self.parseArray()
        case UInt8(ascii: "\""): try self.parseString()
        case UInt8(ascii: "t"): try self.literal("true", .true)
        case UInt8(ascii: "f"): try self.literal("false", .false)
        case UInt8(ascii: "n"): try self.literal("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try self.parseNumber()
        default: throw self.error(self.position < self.bytes.count ? "unexpected character" : "unexpected end of input")
        }
    }

    /// Appends a container's entry; `close` fills in its length and end.
    @inline(__always)
    private mutating func open(_ kind: JSONDocument.Kind) throws(Error) -> Int {
        self.depth += 1
        guard self.depth <= self.limits.maximumDepth else {
            throw self.error("nested deeper than \(self.limits.maximumDepth) levels")
        }
        self.position += 1
        return try self.append(JSONDocument.Entry(kind: kind, start: self.position - 1, length: 0, end: 0))
    }

    /// Closes the container at `index` at the closing bracket under `position`.
    @inline(__always)
    private mutating func close(_ index: Int) {
        self.position += 1
        self.depth -= 1
        // Within UInt32: the input is shorter (checked before parsing), and so are these.
        let start = Int(self.entries[index].start)
        self.entries[index].length = UInt32(truncatingIfNeeded: self.position - start)
        self.entries[index].isCompact = self.afterWhitespace <= start
        self.entries[index].end = UInt32(truncatingIfNeeded: self.count)
    }

    private mutating func parseObject() throws(Error) {
        let object = try self.open(.object)
        var count = 0
        var keys = ObjectKeys()
        self.skipWhitespace()
        if self.peek() == UInt8(ascii: "}") { return self.close(object) }
        while true {
            self.skipWhitespace()
            guard self.peek() == UInt8(ascii: "\"") else { throw self.error("expected a string key") }
            let keyOffset = self.position
            try self.parseString()
            let key = self.count - 1
            if self.mayRepeat(key: key, ordinal: count, in: object, &keys) {
                if self.isDuplicate(key: key, in: object, count: count) {
                    let names = (self.keyPath(to: object) + [key]).map { JSONDocument.string(self.entries[$0], in: self.bytes) }.joined(separator: ".")
                    throw Error(offset: keyOffset, reason: "duplicate key at \(names)")
                }
                self.noteFalseAlarm(key: key, ordinal: count, in: object, &keys)
            }
            count += 1
            self.skipWhitespace()
            guard self.peek() == UInt8(ascii: ":") else { throw self.error("expected ':'") }
            self.position += 1
            self.skipWhitespace()
            // Most values are strings: parsed here, without a call through `parseValue`.
            if self.peek() == UInt8(ascii: "\"") {
                try self.parseString()
            } else {
                try self.parseValue()
            }
            self.skipWhitespace()
            switch self.peek() {
            case UInt8(ascii: ","): self.position += 1
            case UInt8(ascii: "}"): return self.close(object)
            default: throw self.error("expected ',' or '}'")
            }
        }
    }

    /// The keys leading from the root to the open container at `target`, for errors (array
    /// elements are skipped: duplicates are reported with the keys of the enclosing objects).
    /// Containers still open have no end yet, so the way down is through the one child without one.
    private func keyPath(to target: Int) -> [Int] {
        var keys: [Int] = []
        var container = JSONDocument.root
        while container != target {
            let isObject = self.entries[container].kind == .object
            var child = container + 1
            while true {
                let value = isObject ? child + 1 : child
                if self.entries[value].end == 0, value <= target {
                    if isObject { keys.append(child) }
                    container = value
                    break
                }
                child = Int(self.entries[value].end)
            }
        }
        return keys
    }

    /// What an object remembers of its keys, to find a repeat: the words' hashes of its first 16
    /// keys, and how many times a hash matched without the keys being equal.
    private struct ObjectKeys {
        var firstHashes = InlineArray<16, UInt64>(repeating: 0)
        var falseAlarms = 0
        /// Whether the object's keys are in `largeObjectKeys` under seeded hashes (see `noteFalseAlarm`).
        var areSeeded = false
    }

    /// Whether an earlier key of the object at `object` may equal the key at `key`, its member
    /// number `ordinal`; `isDuplicate` then compares the keys. Keys are told apart by their words'
    /// hash: the first 16 inline, later ones (tagged with their object) in `largeObjectKeys`.
    @inline(__always)
    private mutating func mayRepeat(key: Int, ordinal: Int, in object: Int, _ keys: inout ObjectKeys) -> Bool {
        guard ordinal < 16 else { return self.mayRepeatInLargeObject(key: key, in: object, &keys) }
        let hash = KeyWords(self.documentSoFar, key).hash
        var seen = false
        for index in 0..<ordinal where keys.firstHashes[index] == hash { seen = true }
        keys.firstHashes[ordinal] = hash
        return seen
    }

    /// `mayRepeat` past an object's 16th key: against the first 16 inline and the rest in the set,
    /// or, once the object has had too many false alarms, by seeded hash alone. (Kept apart from
    /// `mayRepeat`: merged into it, the small-object path compiled to 1.6k more instructions per
    /// typical message.)
    private mutating func mayRepeatInLargeObject(key: Int, in object: Int, _ keys: inout ObjectKeys) -> Bool {
        if keys.areSeeded { return !self.largeObjectKeys.insert(self.seededHash(ofKey: key, in: object)).inserted }
        let hash = KeyWords(self.documentSoFar, key).hash
        var seen = false
        for index in 0..<16 where keys.firstHashes[index] == hash { seen = true }
        let tagged = hash ^ (UInt64(truncatingIfNeeded: object) &* 0x9E37_79B9_7F4A_7C15)
        // Room for a few large objects without growing step by step (most documents have none).
        if self.largeObjectKeys.isEmpty { self.largeObjectKeys.reserveCapacity(64) }
        return !self.largeObjectKeys.insert(Int(truncatingIfNeeded: tagged)).inserted || seen
    }

    /// A hash matched but the keys differ. Among an object's first 16 keys that costs at most 16
    /// comparisons; past them, each costs a comparison with every earlier key, and words can be
    /// chosen to collide (keys past 16 bytes that differ only in the middle): a megabyte of such
    /// keys took seconds. So after 8 false alarms in one object, its keys go in `largeObjectKeys`
    /// under a seeded hash (`Hasher`) of their decoded bytes, whose collisions an input cannot
    /// choose, and from then on keys are compared only when they are equal.
    private mutating func noteFalseAlarm(key: Int, ordinal: Int, in object: Int, _ keys: inout ObjectKeys) {
        guard ordinal >= 16 else { return }
        keys.falseAlarms += 1
        guard keys.falseAlarms == 8 else { return }
        keys.areSeeded = true
        var earlier = object + 1
        for _ in 0..<ordinal {
            self.largeObjectKeys.insert(self.seededHash(ofKey: earlier, in: object))
            earlier = Int(self.entries[earlier + 1].end)
        }
        self.largeObjectKeys.insert(self.seededHash(ofKey: key, in: object))
    }

    private func seededHash(ofKey key: Int, in object: Int) -> Int {
        var hasher = Hasher()
        hasher.combine(object)
        JSONDocument.withStringBytes(self.entries[key], in: self.bytes) { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        return hasher.finalize()
    }

    /// Whether the key just parsed repeats one of the object's earlier keys, compared decoded.
    private func isDuplicate(key: Int, in object: Int, count: Int) -> Bool {
        let document = self.documentSoFar
        var earlier = object + 1
        for _ in 0..<count {
            if document.stringsEqual(earlier, key) { return true }
            earlier = Int(self.entries[earlier + 1].end)
        }
        return false
    }

    /// The document parsed so far, for comparing keys.
    private var documentSoFar: JSONDocument {
        JSONDocument(bytes: self.bytes, entries: UnsafeBufferPointer(rebasing: self.entries[..<self.count]))
    }

    private mutating func parseArray() throws(Error) {
        let array = try self.open(.array)
        self.skipWhitespace()
        if self.peek() == UInt8(ascii: "]") { return self.close(array) }
        while true {
            self.skipWhitespace()
            try self.parseValue()
            self.skipWhitespace()
            switch self.peek() {
            case UInt8(ascii: ","): self.position += 1
            case UInt8(ascii: "]"): return self.close(array)
            default: throw self.error("expected ',' or ']'")
            }
        }
    }

    /// Checks a string (escapes, control characters, UTF-8) and appends its entry; nothing is decoded.
    @inline(__always)
    private mutating func parseString() throws(Error) {
        let start = self.position + 1
        var position = start
        var isEscaped = false
        var sawNonASCII = false
        while true {
            // Plain runs need no look: step over them eight bytes at a time (UTF-8 is checked at the end).
            position = ASCII.firstJSONSpecialByte(in: self.bytes, from: position, sawNonASCII: &sawNonASCII)
            guard position < self.bytes.count else { throw Error(offset: start - 1, reason: "unterminated string") }
            let byte = self.bytes[position]
            if byte == UInt8(ascii: "\"") { break }
            guard byte == UInt8(ascii: "\\") else {
                self.position = position
                throw self.error("a raw control character in a string")
            }
            isEscaped = true
            self.position = position + 1
            try self.checkEscape(stringStart: start)
            position = self.position
        }
        if sawNonASCII, !UTF8Validation.isValid(UnsafeBufferPointer(rebasing: self.bytes[start..<position])) {
            throw Error(offset: start, reason: "a string is not valid UTF-8")
        }
        self.position = position + 1
        let index = self.count
        try self.append(JSONDocument.Entry(kind: .string, isEscaped: isEscaped, start: start, length: position - start, end: index + 1))
    }

    /// Checks the escape after a backslash (`position` is just past it) and steps over it.
    private mutating func checkEscape(stringStart: Int) throws(Error) {
        guard self.position < self.bytes.count else { throw Error(offset: stringStart - 1, reason: "unterminated string") }
        let escape = self.bytes[self.position]
        self.position += 1
        switch escape {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
            UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            return
        case UInt8(ascii: "u"):
            let scalar = try self.parseHex4()
            if (0xD800...0xDBFF).contains(scalar) {
                guard self.peek() == UInt8(ascii: "\\"), self.peek(at: 1) == UInt8(ascii: "u") else {
                    throw self.error("a lone surrogate in a \\u escape")
                }
                self.position += 2
                let low = try self.parseHex4()
                guard (0xDC00...0xDFFF).contains(low) else { throw self.error("a lone surrogate in a \\u escape") }
            } else if (0xDC00...0xDFFF).contains(scalar) {
                throw self.error("a lone surrogate in a \\u escape")
            }
        default:
            throw self.error("an invalid escape sequence")
        }
    }

    private mutating func parseHex4() throws(Error) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard self.position < self.bytes.count else { throw self.error("a truncated \\u escape") }
            let byte = self.bytes[self.position]
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

    private mutating func parseNumber() throws(Error) {
        let start = self.position
        func digits(_ parser: inout JSONParser) -> Int {
            var count = 0
            while ASCII.isDigit(parser.peek()) {
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
        let index = self.count
        try self.append(JSONDocument.Entry(kind: .number, start: start, length: self.position - start, end: index + 1))
    }

    // MARK: - Helpers

    private mutating func literal(_ literal: StaticString, _ kind: JSONDocument.Kind) throws(Error) {
        let count = literal.utf8CodeUnitCount
        guard self.position + count <= self.bytes.count else { throw self.error("unexpected end of input") }
        let matches = literal.withUTF8Buffer { expected in
            (0..<count).allSatisfy { self.bytes[self.position + $0] == expected[$0] }
        }
        guard matches else { throw self.error("unexpected character") }
        self.position += count
        try self.append(JSONDocument.Entry(kind: kind, start: self.position - count, length: count, end: self.count + 1))
    }

    /// The byte `offset` bytes on, or 0 past the end of the input (a 0 byte is as unexpected
    /// everywhere the parser peeks).
    @inline(__always)
    private func peek(at offset: Int = 0) -> UInt8 {
        self.position + offset < self.bytes.count ? self.bytes[self.position + offset] : 0
    }

    @inline(__always)
    private mutating func skipWhitespace() {
        while true {
            let byte = self.peek()
            // Anything above a space ends the run at once.
            guard byte <= UInt8(ascii: " "),
                byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r") || byte == UInt8(ascii: "\t")
            else { return }
            self.position += 1
            self.afterWhitespace = self.position
        }
    }

    private func error(_ reason: String) -> Error {
        Error(offset: self.position, reason: reason)
    }
}
