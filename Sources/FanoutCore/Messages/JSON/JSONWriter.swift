/// Writes JSON into a byte array: compact, keys in the order given, strings escaped as RFC 8259
/// requires (`"`, `\`, control characters), non-ASCII written as UTF-8.
public struct JSONWriter {
    public private(set) var bytes: [UInt8] = []

    public init() {}

    /// A writer whose buffer starts with room for `capacity` bytes.
    public init(capacity: Int) {
        self.bytes.reserveCapacity(capacity)
    }

    // MARK: - Writing an object member by member

    public mutating func openObject() {
        self.bytes.append(UInt8(ascii: "{"))
    }

    public mutating func closeObject() {
        self.bytes.append(UInt8(ascii: "}"))
    }

    /// Starts a member of the open object: a comma unless it is the first, the key and a colon.
    public mutating func key(_ key: String) {
        if self.bytes.last != UInt8(ascii: "{") { self.bytes.append(UInt8(ascii: ",")) }
        self.write(string: key)
        self.bytes.append(UInt8(ascii: ":"))
    }

    public mutating func write(_ value: JSONValue) {
        switch value {
        case .null: self.bytes.append(contentsOf: "null".utf8)
        case .bool(let bool): self.bytes.append(contentsOf: (bool ? "true" : "false").utf8)
        case .number(let number): self.bytes.append(contentsOf: number.text.utf8)
        case .string(let string): self.write(string: string)
        case .array(let elements):
            self.bytes.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { self.bytes.append(UInt8(ascii: ",")) }
                self.write(element)
            }
            self.bytes.append(UInt8(ascii: "]"))
        case .object(let object):
            self.openObject()
            for member in object.members {
                self.key(member.key)
                self.write(member.value)
            }
            self.closeObject()
        }
    }

    public mutating func write(string: String) {
        self.bytes.append(UInt8(ascii: "\""))
        var string = string
        string.withUTF8 { utf8 in
            // Copy runs that need no escaping in one go; escape the rest.
            var runStart = 0
            var index = ASCII.firstJSONSpecialByte(in: utf8, from: 0, stoppingAtNonASCII: false)
            while index < utf8.count {
                self.bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<index]))
                self.writeEscaped(utf8[index])
                runStart = index + 1
                index = ASCII.firstJSONSpecialByte(in: utf8, from: runStart, stoppingAtNonASCII: false)
            }
            self.bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<utf8.count]))
        }
        self.bytes.append(UInt8(ascii: "\""))
    }

    private mutating func writeEscaped(_ byte: UInt8) {
        switch byte {
        case UInt8(ascii: "\""): self.bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
        case UInt8(ascii: "\\"): self.bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
        case UInt8(ascii: "\n"): self.bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
        case UInt8(ascii: "\r"): self.bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
        case UInt8(ascii: "\t"): self.bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
        default:
            let hex: StaticString = "0123456789abcdef"
            hex.withUTF8Buffer { digits in
                self.bytes.append(contentsOf: [
                    UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                    digits[Int(byte >> 4)], digits[Int(byte & 0xF)],
                ])
            }
        }
    }

    /// The compact JSON text of `value`.
    public static func encode(_ value: JSONValue, capacity: Int = 1024) -> [UInt8] {
        var writer = JSONWriter(capacity: capacity)
        writer.write(value)
        return writer.bytes
    }
}
