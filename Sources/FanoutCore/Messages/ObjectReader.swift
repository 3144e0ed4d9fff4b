/// Reads the fields of one JSON object as proto3's JSON mapping does: each field under its
/// snake_case name or its lowerCamelCase name (not both), unknown names reported, wrong types
/// reported with the field's path. Every problem is added to the shared `Violations`.
struct ObjectReader {
    let path: String
    private let members: [JSONObject.Member]
    /// Each member's key in snake_case, when some key was spelled in camelCase; `nil` when every
    /// key is already snake_case (what the SDKs send), so the keys are compared as they are.
    private let names: [String]?
    /// Members taken so far: a bit per member for the first 64, an array beyond.
    private var takenBits: UInt64 = 0
    private var takenOverflow: [Bool]
    private var remaining: Int

    /// Reads `value` as an object at `path`; a non-object is a violation and reads as empty.
    init?(_ value: JSONValue, at path: String, violations: inout Violations) {
        guard case .object(let object) = value else {
            violations.add(path, "expected an object, got \(value.typeName)")
            return nil
        }
        self.path = path
        self.members = object.members
        let needsConversion = object.members.contains { Self.snakeCase($0.key) != $0.key }
        self.names = needsConversion ? object.members.map { Self.snakeCase($0.key) } : nil
        self.takenOverflow = object.members.count > 64 ? [Bool](repeating: false, count: object.members.count) : []
        self.remaining = object.members.count
    }

    private func isTaken(_ index: Int) -> Bool {
        index < 64 ? self.takenBits & (1 << UInt64(index)) != 0 : self.takenOverflow[index]
    }

    private mutating func markTaken(_ index: Int) {
        if index < 64 { self.takenBits |= 1 << UInt64(index) } else { self.takenOverflow[index] = true }
        self.remaining -= 1
    }

    /// The value of field `name` (snake_case), under either spelling. Objects are small (a few
    /// dozen members at most), so a scan beats hashing.
    mutating func take(_ name: String, violations: inout Violations) -> JSONValue? {
        guard self.remaining > 0 else { return nil }
        var found: JSONValue? = nil
        for index in self.members.indices where !self.isTaken(index) && (self.names?[index] ?? self.members[index].key) == name {
            if found != nil {
                violations.add(self.field(name), "given twice, as \"\(name)\" and \"\(Self.lowerCamelCase(name))\"")
            } else {
                found = self.members[index].value
            }
            self.markTaken(index)
        }
        return found
    }

    /// The path of field `name` below this object.
    func field(_ name: String) -> String { "\(self.path).\(name)" }

    /// Reports every field that was not taken.
    func finish(violations: inout Violations) {
        guard self.remaining > 0 else { return }
        for index in self.members.indices where !self.isTaken(index) {
            violations.add(self.path, "Unknown name \"\(Self.printable(self.members[index].key))\": Cannot find field.")
        }
    }

    // MARK: - Typed reads

    mutating func string(_ name: String, violations: inout Violations) -> String? {
        guard let value = self.take(name, violations: &violations) else { return nil }
        guard case .string(let string) = value else {
            violations.add(self.field(name), "expected a string, got \(value.typeName)")
            return nil
        }
        return string
    }

    mutating func bool(_ name: String, violations: inout Violations) -> Bool? {
        guard let value = self.take(name, violations: &violations) else { return nil }
        guard case .bool(let bool) = value else {
            violations.add(self.field(name), "expected a boolean, got \(value.typeName)")
            return nil
        }
        return bool
    }

    /// An int32, as a JSON number or (proto3 JSON) a decimal string.
    mutating func int32(_ name: String, violations: inout Violations) -> Int32? {
        guard let value = self.take(name, violations: &violations) else { return nil }
        let number: Int64?
        switch value {
        case .number(let n): number = n.int64
        case .string(let s): number = Int64(s)
        default: number = nil
        }
        guard let number, let result = Int32(exactly: number) else {
            violations.add(self.field(name), "expected a 32-bit integer")
            return nil
        }
        return result
    }

    /// A double, as a JSON number.
    mutating func double(_ name: String, violations: inout Violations) -> Double? {
        guard let value = self.take(name, violations: &violations) else { return nil }
        guard case .number(let number) = value, let double = number.double else {
            violations.add(self.field(name), "expected a number, got \(value.typeName)")
            return nil
        }
        return double
    }

    mutating func strings(_ name: String, violations: inout Violations) -> [String]? {
        guard let value = self.take(name, violations: &violations) else { return nil }
        guard case .array(let elements) = value else {
            violations.add(self.field(name), "expected an array of strings, got \(value.typeName)")
            return nil
        }
        var result: [String] = []
        for (index, element) in elements.enumerated() {
            guard case .string(let string) = element else {
                violations.add("\(self.field(name))[\(index)]", "expected a string, got \(element.typeName)")
                continue
            }
            result.append(string)
        }
        return result
    }

    /// A map of strings to strings (`data`, `headers`), in input order.
    mutating func stringMap(_ name: String, violations: inout Violations) -> [(key: String, value: String)]? {
        guard let value = self.take(name, violations: &violations) else { return nil }
        guard case .object(let object) = value else {
            violations.add(self.field(name), "expected an object of strings, got \(value.typeName)")
            return nil
        }
        var result: [(key: String, value: String)] = []
        for member in object.members {
            guard case .string(let string) = member.value else {
                violations.add(
                    "\(self.field(name)).\(Self.printable(member.key))",
                    "expected a string value, got \(member.value.typeName)"
                )
                continue
            }
            result.append((member.key, string))
        }
        return result
    }

    mutating func object(_ name: String, violations: inout Violations) -> ObjectReader? {
        guard let value = self.take(name, violations: &violations) else { return nil }
        return ObjectReader(value, at: self.field(name), violations: &violations)
    }

    /// Reads field `name` as an object with `read` (which finishes the inner reader); `nil` when
    /// the field is absent or not an object.
    mutating func read<T>(
        _ name: String,
        violations: inout Violations,
        with read: (inout ObjectReader, inout Violations) -> T
    ) -> T? {
        guard var object = self.object(name, violations: &violations) else { return nil }
        return read(&object, &violations)
    }

    // MARK: - Names

    /// `collapseKey` -> `collapse_key`; keys without an uppercase ASCII letter are returned as they are.
    static func snakeCase(_ key: String) -> String {
        guard key.utf8.contains(where: ASCII.isUppercase) else { return key }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(key.utf8.count + 4)
        for byte in key.utf8 {
            if ASCII.isUppercase(byte) {
                bytes.append(UInt8(ascii: "_"))
                bytes.append(ASCII.lowercased(byte))
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func lowerCamelCase(_ snake: String) -> String {
        var result = ""
        var upperNext = false
        for character in snake {
            if character == "_" {
                upperNext = true
            } else if upperNext {
                result += character.uppercased()
                upperNext = false
            } else {
                result.append(character)
            }
        }
        return result
    }

    /// A key as it may appear in an error: at most 64 characters, control characters replaced.
    static func printable(_ key: String) -> String {
        let cleaned = String(String.UnicodeScalarView(key.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? "?" : $0 }))
        return cleaned.count > 64 ? String(cleaned.prefix(64)) + "..." : cleaned
    }
}
