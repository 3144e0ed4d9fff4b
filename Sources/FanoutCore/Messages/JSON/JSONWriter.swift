/// Writes JSON into a byte array: compact, keys in the order given, strings escaped as RFC 8259
/// requires (`"`, `\`, control characters), non-ASCII written as UTF-8.
public struct JSONWriter {
    public private(set) var bytes: [UInt8] = []

    public init() {}

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
            self.bytes.append(UInt8(ascii: "{"))
            for (index, member) in object.members.enumerated() {
                if index > 0 { self.bytes.append(UInt8(ascii: ",")) }
                self.write(string: member.key)
                self.bytes.append(UInt8(ascii: ":"))
                self.write(member.value)
            }
            self.bytes.append(UInt8(ascii: "}"))
        }
    }

    public mutating func write(string: String) {
        self.bytes.append(UInt8(ascii: "\""))
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""): self.bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): self.bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case UInt8(ascii: "\n"): self.bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case UInt8(ascii: "\r"): self.bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case UInt8(ascii: "\t"): self.bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0..<0x20:
                let hex: [UInt8] = Array("0123456789abcdef".utf8)
                self.bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                self.bytes.append(hex[Int(byte >> 4)])
                self.bytes.append(hex[Int(byte & 0xF)])
            default: self.bytes.append(byte)
            }
        }
        self.bytes.append(UInt8(ascii: "\""))
    }

    /// The compact JSON text of `value`.
    public static func encode(_ value: JSONValue) -> [UInt8] {
        var writer = JSONWriter()
        writer.write(value)
        return writer.bytes
    }
}
