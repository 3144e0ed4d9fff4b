/// Reads the fields of one JSON object as proto3's JSON mapping does: each field under its
/// snake_case name or its lowerCamelCase name (not both), unknown names reported, wrong types
/// reported with the field's path. Every problem is added to the shared `Violations`.
struct ObjectReader {
    let path: String
    private var remaining: [String: JSONValue]
    private var order: [String]

    /// Reads `value` as an object at `path`; a non-object is a violation and reads as empty.
    init?(_ value: JSONValue, at path: String, violations: inout Violations) {
        guard case .object(let object) = value else {
            violations.add(path, "expected an object, got \(value.typeName)")
            return nil
        }
        self.path = path
        self.remaining = [:]
        self.order = []
        for member in object.members {
            self.remaining[member.key] = member.value
            self.order.append(member.key)
        }
    }

    /// The value of field `name` (snake_case), under either spelling.
    mutating func take(_ name: String, violations: inout Violations) -> JSONValue? {
        let camel = Self.lowerCamelCase(name)
        let snakeValue = self.remaining.removeValue(forKey: name)
        let camelValue = camel == name ? nil : self.remaining.removeValue(forKey: camel)
        if snakeValue != nil && camelValue != nil {
            violations.add(self.field(name), "given twice, as \"\(name)\" and \"\(camel)\"")
        }
        return snakeValue ?? camelValue
    }

    /// The path of field `name` below this object.
    func field(_ name: String) -> String { "\(self.path).\(name)" }

    /// Reports every field that was not taken.
    func finish(violations: inout Violations) {
        for key in self.order where self.remaining[key] != nil {
            violations.add(self.path, "Unknown name \"\(Self.printable(key))\": Cannot find field.")
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

    // MARK: - Names

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
