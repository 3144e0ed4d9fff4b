import Glibc

/// A parsed JSON document kept flat: one entry per value, in input order, each pointing into the
/// input bytes. Nothing is decoded until a reader asks, so validating a message builds no tree and
/// no strings it does not keep. `JSONParser.document(_:)` makes one; every entry in it has passed
/// the parser's checks (valid UTF-8, valid escapes, no duplicate keys, bounded numbers), so reading
/// it cannot fail.
///
/// Layout: an array's entry is followed by its elements; an object's by its members, each a key
/// (a string entry) then the value's entries. `Entry.end` is the index just past a value and
/// everything inside it, so a reader steps over a member in one move.
///
/// A document borrows its storage: it is valid only inside the `JSONParser.withDocument` call that
/// made it (reading it costs no reference counting), and whatever a reader keeps, it copies out.
struct JSONDocument {
    enum Kind: UInt8, Sendable {
        case null, `false`, `true`, number, string, array, object
    }

    struct Entry: Sendable {
        var kind: Kind
        /// A string with backslash escapes, decoded when read.
        var isEscaped = false
        /// A container whose text holds no whitespace: it is then, byte for byte, what a writer
        /// copying it member by member would write, and is copied in one piece.
        var isCompact = false
        /// Strings: the first byte after the opening quote. Others: the first byte.
        var start: UInt32
        /// Strings: how many bytes between the quotes (raw, escapes included). Others: how many
        /// bytes of text, brackets included.
        var length: UInt32
        /// The index of the entry after this value and its contents.
        var end: UInt32
        /// An entry from `Int` positions, which the parser keeps below `UInt32.max` (its input is shorter).
        @inline(__always)
        init(kind: Kind, isEscaped: Bool = false, start: Int, length: Int, end: Int) {
            self.kind = kind
            self.isEscaped = isEscaped
            self.start = UInt32(truncatingIfNeeded: start)
            self.length = UInt32(truncatingIfNeeded: length)
            self.end = UInt32(truncatingIfNeeded: end)
        }
    }

    let bytes: UnsafeBufferPointer<UInt8>
    let entries: UnsafeBufferPointer<Entry>

    /// The document's value.
    static let root = 0

    func kind(of index: Int) -> Kind { self.entries[index].kind }

    /// The index just past the value at `index` and its contents.
    func end(of index: Int) -> Int { Int(self.entries[index].end) }

    /// The JSON type's name, for error messages ("expected a string, got a number").
    func typeName(of index: Int) -> String {
        switch self.kind(of: index) {
        case .null: return "null"
        case .false, .true: return "a boolean"
        case .number: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }

    // MARK: - Scalars

    func bool(at index: Int) -> Bool? {
        switch self.kind(of: index) {
        case .true: return true
        case .false: return false
        default: return nil
        }
    }

    /// The string at `index`, decoded; `nil` for other kinds.
    func string(at index: Int) -> String? {
        let entry = self.entries[index]
        guard entry.kind == .string else { return nil }
        return Self.string(entry, in: self.bytes)
    }

    /// The number at `index` as an integer, when it is one exactly (no fraction or exponent, in range).
    func int64(at index: Int) -> Int64? {
        let entry = self.entries[index]
        guard entry.kind == .number else { return nil }
        // A JSON number lexeme: an optional minus, then digits unless it has a fraction or exponent.
        let lexeme = Self.rawBytes(entry, in: self.bytes)
        let isNegative = lexeme.first == UInt8(ascii: "-")
        guard let magnitude = ASCII.decimal(UnsafeBufferPointer(rebasing: lexeme.dropFirst(isNegative ? 1 : 0))) else { return nil }
        guard isNegative else { return Int64(exactly: magnitude) }
        return magnitude <= Int64.min.magnitude ? Int64(truncatingIfNeeded: 0 &- magnitude) : nil
    }

    /// The number at `index` as a double (`nil` for other kinds, or a lexeme that overflows).
    func double(at index: Int) -> Double? {
        guard let number = self.number(at: index), let value = Double(number.text), value.isFinite else { return nil }
        return value
    }

    func number(at index: Int) -> JSONNumber? {
        let entry = self.entries[index]
        return entry.kind == .number ? self.lexeme(entry) : nil
    }

    private func lexeme(_ entry: Entry) -> JSONNumber {
        JSONNumber(text: String(decoding: Self.rawBytes(entry, in: self.bytes), as: UTF8.self))
    }

    // MARK: - Containers

    /// The number of elements or members of the container at `index`, counted (containers keep
    /// where their text is, not their size) up to `limit`.
    func count(of index: Int, upTo limit: Int = .max) -> Int {
        let isObject = self.kind(of: index) == .object
        guard isObject || self.kind(of: index) == .array else { return 0 }
        let end = self.end(of: index)
        var count = 0
        var child = index + 1
        while child < end, count < limit {
            // A member is its key and its value; the value's entry says where the next one starts.
            child = self.end(of: isObject ? child + 1 : child)
            count += 1
        }
        return count
    }

    /// Whether the container at `index` has no elements or members.
    func isEmpty(_ index: Int) -> Bool {
        self.end(of: index) == index + 1
    }

    /// The members of the object at `index`: the index of each key and of its value.
    @inline(__always)
    func members(of index: Int) -> Members {
        Members(document: self, index: index + 1, end: self.kind(of: index) == .object ? self.end(of: index) : 0)
    }

    /// The elements of the array at `index`.
    func elements(of index: Int) -> Elements {
        Elements(document: self, index: index + 1, end: self.kind(of: index) == .array ? self.end(of: index) : 0)
    }

    struct Members: Sequence, IteratorProtocol {
        let document: JSONDocument
        var index: Int
        let end: Int

        mutating func next() -> (key: Int, value: Int)? {
            guard self.index < self.end else { return nil }
            let key = self.index
            self.index = self.document.end(of: key + 1)
            return (key, key + 1)
        }
    }

    struct Elements: Sequence, IteratorProtocol {
        let document: JSONDocument
        var index: Int
        let end: Int

        mutating func next() -> Int? {
            guard self.index < self.end else { return nil }
            defer { self.index = self.document.end(of: self.index) }
            return self.index
        }
    }

    // MARK: - Text as it stands

    /// Whether the container at `index` holds no whitespace (see `Entry.isCompact`).
    func isCompact(_ index: Int) -> Bool { self.entries[index].isCompact }

    /// The text of the value at `index` as it stands in the input (a string with its quotes).
    func rawText(of index: Int) -> UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(rebasing: self.bytes[self.textRange(of: index)])
    }

    /// The text of the members from the one whose key is at `firstKey` through the one whose value
    /// is at `lastValue`, as it stands in the input (commas between them included).
    func rawText(from firstKey: Int, through lastValue: Int) -> UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(rebasing: self.bytes[self.textRange(of: firstKey).lowerBound..<self.textRange(of: lastValue).upperBound])
    }

    /// Where the text of the value (or key) at `index` is in the input, a string's quotes included.
    @inline(__always)
    private func textRange(of index: Int) -> Range<Int> {
        let entry = self.entries[index]
        let quote = entry.kind == .string ? 1 : 0
        return Int(entry.start) - quote..<Int(entry.start + entry.length) + quote
    }

    // MARK: - Strings without decoding

    /// Calls `body` with the decoded UTF-8 of the string at `index` (the input bytes themselves
    /// when it has no escapes).
    func withStringBytes<R>(at index: Int, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        self.withStringBytes(self.entries[index], body)
    }

    /// The raw bytes of the string (between its quotes, escapes included) or number at `index`,
    /// as they stand in the input: what a writer copies.
    func rawBytes(at index: Int) -> UnsafeBufferPointer<UInt8> {
        Self.rawBytes(self.entries[index], in: self.bytes)
    }

    /// The decoded length in bytes of the string at `index`.
    func stringLength(at index: Int) -> Int {
        let entry = self.entries[index]
        return entry.isEscaped ? self.withStringBytes(entry) { $0.count } : Int(entry.length)
    }

    /// Whether the string at `index` is `expected`.
    func string(at index: Int, equals expected: StaticString) -> Bool {
        let entry = self.entries[index]
        guard entry.kind == .string, entry.isEscaped || Int(entry.length) == expected.utf8CodeUnitCount else { return false }
        return self.withStringBytes(entry) { bytes in
            expected.withUTF8Buffer { Self.equal(bytes, $0) }
        }
    }

    /// Whether the string at `index` is one of `expected`.
    func string(at index: Int, isOneOf expected: [StaticString]) -> Bool {
        expected.contains { self.string(at: index, equals: $0) }
    }

    /// Whether the keys (or strings) at `a` and `b` are equal, compared decoded.
    func stringsEqual(_ a: Int, _ b: Int) -> Bool {
        let (first, second) = (self.entries[a], self.entries[b])
        if !first.isEscaped, !second.isEscaped {
            guard first.length == second.length else { return false }
            return Self.equal(self.rawBytes(at: a), self.rawBytes(at: b))
        }
        return self.withStringBytes(first) { first in self.withStringBytes(second) { Self.equal(first, $0) } }
    }

    private static func equal(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Bool {
        guard a.count == b.count else { return false }
        guard let first = a.baseAddress, let second = b.baseAddress else { return true }
        return memcmp(first, second, a.count) == 0
    }

    /// The member of the object at `object` whose key equals the string at `key`, if any.
    func member(of object: Int, withKeyEqualTo key: Int) -> (key: Int, value: Int)? {
        self.members(of: object).first { self.stringsEqual($0.key, key) }
    }

    /// The value of the member of the object at `object` whose key is `name`, if any.
    func member(of object: Int, named name: StaticString) -> Int? {
        self.members(of: object).first { self.string(at: $0.key, equals: name) }?.value
    }

    /// An int32 at `index`: a JSON number, or (proto3 JSON) a decimal string.
    func int32(at index: Int) -> Int32? {
        let number: Int64?
        switch self.kind(of: index) {
        case .number: number = self.int64(at: index)
        case .string: number = self.string(at: index).flatMap { Int64($0) }
        default: number = nil
        }
        return number.flatMap { Int32(exactly: $0) }
    }

    // MARK: - Trees

    /// The value at `index` as a `JSONValue` tree (for the parts of a message kept as given).
    func value(at index: Int) -> JSONValue {
        switch self.kind(of: index) {
        case .null: return .null
        case .false: return .bool(false)
        case .true: return .bool(true)
        case .number: return .number(self.lexeme(self.entries[index]))
        case .string: return .string(Self.string(self.entries[index], in: self.bytes))
        case .array: return .array(self.elements(of: index).map { self.value(at: $0) })
        case .object: return .object(self.object(at: index))
        }
    }

    /// The object at `index` as a `JSONObject` (empty for other kinds).
    func object(at index: Int) -> JSONObject {
        JSONObject(
            self.members(of: index).map { member in
                .init(key: Self.string(self.entries[member.key], in: self.bytes), value: self.value(at: member.value))
            }
        )
    }

    // MARK: - String bytes

    /// Calls `body` with the decoded UTF-8 of a string entry: the input bytes themselves when the
    /// string has no escapes.
    func withStringBytes<R>(_ entry: Entry, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        Self.withStringBytes(entry, in: self.bytes, body)
    }

    /// `withStringBytes` for an entry over `bytes` (the parser's, before the document exists).
    static func withStringBytes<R>(_ entry: Entry, in bytes: UnsafeBufferPointer<UInt8>, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        let raw = Self.rawBytes(entry, in: bytes)
        guard entry.isEscaped else { return body(raw) }
        return Self.unescaped(raw).withUnsafeBufferPointer(body)
    }

    /// A string entry over `bytes`, decoded.
    static func string(_ entry: Entry, in bytes: UnsafeBufferPointer<UInt8>) -> String {
        Self.withStringBytes(entry, in: bytes) { String(decoding: $0, as: UTF8.self) }
    }

    /// The bytes of a string (escapes included) or number entry, as they stand in `bytes`.
    @inline(__always)
    static func rawBytes(_ entry: Entry, in bytes: UnsafeBufferPointer<UInt8>) -> UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(rebasing: bytes[Int(entry.start)..<Int(entry.start + entry.length)])
    }

    /// The UTF-8 of a string's raw content with its escapes decoded. The parser checked every
    /// escape, so there is nothing to reject here.
    static func unescaped(_ raw: UnsafeBufferPointer<UInt8>) -> [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(raw.count)
        var position = raw.startIndex
        func hex4(_ at: Int) -> UInt32 {
            UnsafeBufferPointer(rebasing: raw[at..<at + 4]).reduce(0) { value, byte in
                let digit: UInt8 =
                    byte <= UInt8(ascii: "9") ? byte - UInt8(ascii: "0") : (byte | 0x20) - UInt8(ascii: "a") + 10
                return value << 4 | UInt32(digit)
            }
        }
        while position < raw.endIndex {
            let byte = raw[position]
            guard byte == UInt8(ascii: "\\") else {
                result.append(byte)
                position += 1
                continue
            }
            let escape = raw[position + 1]
            position += 2
            switch escape {
            case UInt8(ascii: "b"): result.append(0x08)
            case UInt8(ascii: "f"): result.append(0x0C)
            case UInt8(ascii: "n"): result.append(0x0A)
            case UInt8(ascii: "r"): result.append(0x0D)
            case UInt8(ascii: "t"): result.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = hex4(position)
                position += 4
                if (0xD800...0xDBFF).contains(scalar) {
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (hex4(position + 2) - 0xDC00)
                    position += 6
                }
                UTF8.encode(Unicode.Scalar(scalar) ?? "\u{FFFD}") { result.append($0) }
            default: result.append(escape)  // " \ /
            }
        }
        return result
    }
}
