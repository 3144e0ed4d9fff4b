/// Writes JSON into a buffer of its own: compact, keys in the order given, strings escaped as
/// RFC 8259 requires (`"`, `\`, control characters), non-ASCII written as UTF-8. `bytes` copies
/// out what was written; `removeAll()` starts again in the same buffer (rendering writes a
/// message's three payloads in one).
package struct JSONWriter: ~Copyable {
    private var buffer: UnsafeMutableBufferPointer<UInt8>
    private var count = 0
    /// Whether the writer allocated `buffer` (and frees it), rather than writing in memory lent to it.
    private var ownsBuffer = true

    /// A writer whose buffer starts with room for `capacity` bytes.
    package init(capacity: Int = 1024) {
        self.buffer = .allocate(capacity: max(capacity, 64))
    }

    /// A writer that starts in `scratch`, lent to it for its whole life (it moves to memory of its
    /// own if it outgrows it).
    init(scratch: UnsafeMutableRawBufferPointer) {
        self.buffer = scratch.bindMemory(to: UInt8.self)
        self.ownsBuffer = false
    }

    deinit {
        if self.ownsBuffer { self.buffer.deallocate() }
    }

    /// What was written so far.
    package var bytes: [UInt8] {
        Array(UnsafeBufferPointer(rebasing: self.buffer[..<self.count]))
    }

    /// How many bytes were written so far.
    var byteCount: Int { self.count }

    /// Forgets what was written, keeping the buffer.
    package mutating func removeAll() {
        self.count = 0
    }

    // MARK: - Bytes

    @inline(__always)
    private mutating func reserve(_ extra: Int) {
        if self.count + extra > self.buffer.count { self.grow(toFit: extra) }
    }

    private mutating func grow(toFit extra: Int) {
        let grown = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(self.buffer.count * 2, self.count + extra))
        _ = grown.initialize(fromContentsOf: self.buffer[..<self.count])
        if self.ownsBuffer { self.buffer.deallocate() }
        self.buffer = grown
        self.ownsBuffer = true
    }

    /// Reserves `extra` bytes and lets `body` write them through a cursor; the count is stored
    /// once, at the end. (Appending to `self` directly reloaded and stored the count around every
    /// byte: a store into the buffer might, for all the compiler knows, change it.)
    @inline(__always)
    private mutating func writing(_ extra: Int, _ body: (inout Cursor) -> Void) {
        self.reserve(extra)
        guard let base = self.buffer.baseAddress else { return }  // never: the buffer is allocated
        var cursor = Cursor(start: base, position: base + self.count)
        body(&cursor)
        self.count = cursor.position - base
    }

    /// Where the next byte goes, inside room already reserved.
    private struct Cursor {
        /// The buffer's first byte.
        let start: UnsafeMutablePointer<UInt8>
        var position: UnsafeMutablePointer<UInt8>

        @inline(__always)
        mutating func put(_ byte: UInt8) {
            self.position.pointee = byte
            self.position += 1
        }

        /// Most bytes put are keys and short values: up to 16 are copied with two overlapping
        /// loads and stores, not a call to `memcpy`.
        @inline(__always)
        mutating func put(_ bytes: UnsafeBufferPointer<UInt8>) {
            guard let source = bytes.baseAddress else { return }
            let count = bytes.count
            let target = UnsafeMutableRawPointer(self.position)
            switch count {
            case 8...16:
                let (head, tail) = (UnsafeRawPointer(source).loadUnaligned(as: UInt64.self), UnsafeRawPointer(source + count - 8).loadUnaligned(as: UInt64.self))
                target.storeBytes(of: head, as: UInt64.self)
                (target + count - 8).storeBytes(of: tail, as: UInt64.self)
            case 4..<8:
                let (head, tail) = (UnsafeRawPointer(source).loadUnaligned(as: UInt32.self), UnsafeRawPointer(source + count - 4).loadUnaligned(as: UInt32.self))
                target.storeBytes(of: head, as: UInt32.self)
                (target + count - 4).storeBytes(of: tail, as: UInt32.self)
            case 0..<4:
                for offset in 0..<count { target.storeBytes(of: source[offset], toByteOffset: offset, as: UInt8.self) }
            default:
                target.copyMemory(from: source, byteCount: count)
            }
            self.position += count
        }

        /// A comma, unless the member is the first of its object.
        @inline(__always)
        mutating func separate() {
            if self.position > self.start, self.position[-1] != UInt8(ascii: "{") { self.put(UInt8(ascii: ",")) }
        }

        /// A member's start: a comma unless it is the first of its object, the key (raw JSON string
        /// text) between quotes, and a colon.
        @inline(__always)
        mutating func putKey(_ raw: UnsafeBufferPointer<UInt8>) {
            self.separate()
            self.putString(raw)
            self.put(UInt8(ascii: ":"))
        }

        /// A string's raw content (already valid JSON string text) between quotes.
        @inline(__always)
        mutating func putString(_ raw: UnsafeBufferPointer<UInt8>) {
            self.put(UInt8(ascii: "\""))
            self.put(raw)
            self.put(UInt8(ascii: "\""))
        }
    }

    @inline(__always)
    private mutating func append(_ byte: UInt8) {
        self.writing(1) { $0.put(byte) }
    }

    @inline(__always)
    private mutating func append(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.writing(bytes.count) { $0.put(bytes) }
    }

    @inline(__always)
    private mutating func append(_ text: StaticString) {
        text.withUTF8Buffer { self.append($0) }
    }

    // MARK: - Writing an object member by member

    @inline(__always)
    package mutating func openObject() {
        self.append(UInt8(ascii: "{"))
    }

    @inline(__always)
    package mutating func closeObject() {
        self.append(UInt8(ascii: "}"))
    }

    /// A comma, unless the member is the first of its object.
    @inline(__always)
    private mutating func separate() {
        self.writing(1) { $0.separate() }
    }

    /// Starts a member of the open object: a comma unless it is the first, the key and a colon.
    package mutating func key(_ key: String) {
        self.separate()
        self.write(string: key)
        self.append(UInt8(ascii: ":"))
    }

    /// Starts a member whose key is known to need no escaping.
    @inline(__always)
    mutating func key(static key: StaticString) {
        key.withUTF8Buffer { key in
            self.writing(key.count + 4) { $0.putKey(key) }
        }
    }

    package mutating func write(_ value: JSONValue) {
        switch value {
        case .null: self.append("null")
        case .bool(let bool): self.append(bool ? "true" : "false")
        case .number(let number):
            var text = number.text
            text.withUTF8 { self.append($0) }
        case .string(let string): self.write(string: string)
        case .array(let elements):
            self.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { self.append(UInt8(ascii: ",")) }
                self.write(element)
            }
            self.append(UInt8(ascii: "]"))
        case .object(let object):
            self.openObject()
            for member in object.members {
                self.key(member.key)
                self.write(member.value)
            }
            self.closeObject()
        }
    }

    /// Bytes written before by a writer (a rendering's shared start), copied as they are.
    mutating func write(rendered bytes: ArraySlice<UInt8>) {
        bytes.withUnsafeBufferPointer { self.append($0) }
    }

    /// A number or literal known to be valid JSON (`1`, `true`).
    mutating func write(static literal: StaticString) {
        self.append(literal)
    }

    package mutating func write(string: String) {
        self.append(UInt8(ascii: "\""))
        var string = string
        string.withUTF8 { utf8 in
            // Copy runs that need no escaping in one go; escape the rest.
            var runStart = 0
            var index = ASCII.firstJSONSpecialByte(in: utf8, from: 0)
            while index < utf8.count {
                self.append(UnsafeBufferPointer(rebasing: utf8[runStart..<index]))
                self.writeEscaped(utf8[index])
                runStart = index + 1
                index = ASCII.firstJSONSpecialByte(in: utf8, from: runStart)
            }
            self.append(UnsafeBufferPointer(rebasing: utf8[runStart..<utf8.count]))
        }
        self.append(UInt8(ascii: "\""))
    }

    private mutating func writeEscaped(_ byte: UInt8) {
        switch byte {
        case UInt8(ascii: "\""): self.append("\\\"")
        case UInt8(ascii: "\\"): self.append("\\\\")
        case UInt8(ascii: "\n"): self.append("\\n")
        case UInt8(ascii: "\r"): self.append("\\r")
        case UInt8(ascii: "\t"): self.append("\\t")
        default:
            let hex: StaticString = "0123456789abcdef"
            self.append("\\u00")
            hex.withUTF8Buffer { digits in
                self.append(digits[Int(byte >> 4)])
                self.append(digits[Int(byte & 0xF)])
            }
        }
    }

    // MARK: - Copying from a parsed document

    /// Starts a member whose key is the string at `key` in `document`, copied as it stands; with
    /// `snakeCase`, a proto3 field name is written in its snake_case spelling (`collapseKey` as
    /// `collapse_key`).
    mutating func key(_ document: JSONDocument, _ key: Int, snakeCase: Bool = false) {
        let raw = document.rawBytes(at: key)
        guard snakeCase, ASCII.containsUppercase(raw) else {
            self.writing(raw.count + 4) { $0.putKey(raw) }
            return
        }
        self.separate()
        if document.entries[key].isEscaped {
            self.write(string: FieldTable.snakeCase(document.string(at: key) ?? ""))
        } else {
            self.append(UInt8(ascii: "\""))
            for byte in raw {
                if ASCII.isUppercase(byte) {
                    self.append(UInt8(ascii: "_"))
                    self.append(byte | 0x20)
                } else {
                    self.append(byte)
                }
            }
            self.append(UInt8(ascii: "\""))
        }
        self.append(UInt8(ascii: ":"))
    }

    /// Writes the value at `index` in `document` compactly, strings and numbers copied as they
    /// stand in the input (the parser checked them), a container without whitespace in one piece;
    /// with `snakeCaseKeys`, object keys as in `key`.
    mutating func write(_ document: JSONDocument, _ index: Int, snakeCaseKeys: Bool = false) {
        if !snakeCaseKeys, document.isCompact(index) { return self.append(document.rawText(of: index)) }
        switch document.kind(of: index) {
        case .null: self.append("null")
        case .false: self.append("false")
        case .true: self.append("true")
        case .number: self.append(document.rawBytes(at: index))
        case .string: self.writeRawString(document.rawBytes(at: index))
        case .array:
            self.append(UInt8(ascii: "["))
            for (position, element) in document.elements(of: index).enumerated() {
                if position > 0 { self.append(UInt8(ascii: ",")) }
                self.write(document, element, snakeCaseKeys: snakeCaseKeys)
            }
            self.append(UInt8(ascii: "]"))
        case .object:
            self.openObject()
            self.members(document, of: index, snakeCaseKeys: snakeCaseKeys)
            self.closeObject()
        }
    }

    /// Copies a member of an object in `document` as it stands in the input: `"key":value`, after
    /// a comma unless it is the first of the object being written; with `snakeCaseKeys`, keys as
    /// in `key(_:_:snakeCase:)`.
    mutating func member(_ document: JSONDocument, _ member: (key: Int, value: Int), snakeCaseKeys: Bool = false) {
        let key = document.rawBytes(at: member.key)
        if !snakeCaseKeys || !ASCII.containsUppercase(key), self.writeScalarMember(key, document, member.value) { return }
        self.key(document, member.key, snakeCase: snakeCaseKeys)
        self.write(document, member.value, snakeCaseKeys: snakeCaseKeys)
    }

    /// Copies the members of the object at `object` that `include` keeps, each as `member` would;
    /// when the object holds no whitespace, each run of consecutive members kept is copied in one
    /// piece (with `snakeCaseKeys`, a run takes only members whose keys have no capitals and whose
    /// values have no keys).
    @inline(__always)
    mutating func members(
        _ document: JSONDocument,
        of object: Int,
        snakeCaseKeys: Bool = false,
        where include: (_ member: (key: Int, value: Int)) -> Bool = { _ in true }
    ) {
        guard document.isCompact(object) else {
            for member in document.members(of: object) where include(member) {
                self.member(document, member, snakeCaseKeys: snakeCaseKeys)
            }
            return
        }
        var run: (firstKey: Int, lastValue: Int)?
        for member in document.members(of: object) {
            let isKept = include(member)
            if isKept, !snakeCaseKeys || Self.isWrittenAsItStands(document, member) {
                run = (run?.firstKey ?? member.key, member.value)
                continue
            }
            if let run { self.members(document.rawText(from: run.firstKey, through: run.lastValue)) }
            run = nil
            if isKept { self.member(document, member, snakeCaseKeys: snakeCaseKeys) }
        }
        if let run { self.members(document.rawText(from: run.firstKey, through: run.lastValue)) }
    }

    /// Whether a member is written with snake_case keys as it stands: its key has no capitals
    /// and its value no keys.
    @inline(__always)
    private static func isWrittenAsItStands(_ document: JSONDocument, _ member: (key: Int, value: Int)) -> Bool {
        let kind = document.kind(of: member.value)
        return kind != .object && kind != .array && !ASCII.containsUppercase(document.rawBytes(at: member.key))
    }

    /// Members copied as they stand (`"a":1,"b":2`), after a comma unless they are the first of
    /// the object being written.
    private mutating func members(_ text: UnsafeBufferPointer<UInt8>) {
        self.writing(text.count + 1) { cursor in
            cursor.separate()
            cursor.put(text)
        }
    }

    /// A member whose key is known to need no escaping, its value copied from `document`.
    mutating func member(static key: StaticString, _ document: JSONDocument, _ value: Int) {
        if key.withUTF8Buffer({ self.writeScalarMember($0, document, value) }) { return }
        self.key(static: key)
        self.write(document, value)
    }

    /// Writes `"key":value` when the value at `value` in `document` is a string or a number, with
    /// one reservation for all of it; whether it was one.
    @inline(__always)
    private mutating func writeScalarMember(_ key: UnsafeBufferPointer<UInt8>, _ document: JSONDocument, _ value: Int) -> Bool {
        let kind = document.kind(of: value)
        guard kind == .string || kind == .number else { return false }
        let value = document.rawBytes(at: value)
        self.writing(key.count + value.count + 6) { cursor in
            cursor.putKey(key)
            if kind == .string {
                cursor.putString(value)
            } else {
                cursor.put(value)
            }
        }
        return true
    }

    /// A proto3 JSON `Duration` of whole seconds: `"86400s"`.
    mutating func write(durationSeconds seconds: Int64) {
        // The digits, least significant first, then copied out in order.
        var digits = InlineArray<20, UInt8>(repeating: 0)
        var remaining = seconds.magnitude
        var count = 0
        repeat {
            digits[count] = UInt8(ascii: "0") + UInt8(remaining % 10)
            remaining /= 10
            count += 1
        } while remaining > 0
        self.writing(count + 4) { cursor in
            cursor.put(UInt8(ascii: "\""))
            if seconds < 0 { cursor.put(UInt8(ascii: "-")) }
            for index in stride(from: count - 1, through: 0, by: -1) { cursor.put(digits[index]) }
            cursor.put(UInt8(ascii: "s"))
            cursor.put(UInt8(ascii: "\""))
        }
    }

    /// A string's raw content (already valid JSON string text) between quotes.
    @inline(__always)
    private mutating func writeRawString(_ raw: UnsafeBufferPointer<UInt8>) {
        self.writing(raw.count + 2) { $0.putString(raw) }
    }

    /// The compact JSON text of `value`.
    package static func encode(_ value: JSONValue, capacity: Int = 1024) -> [UInt8] {
        var writer = JSONWriter(capacity: capacity)
        writer.write(value)
        return writer.bytes
    }
}
