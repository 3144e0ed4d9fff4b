/// Reads the fields of one JSON object as proto3's JSON mapping does: each field under its
/// snake_case name or its lowerCamelCase name (not both), unknown names reported, wrong types
/// reported with the field's path. Every problem is added to the shared `Violations`. A reader
/// borrows its document: use it only inside the `JSONParser.withDocument` call that made it.
struct ObjectReader {
    let document: JSONDocument
    let path: String
    /// The object's entry in `document`.
    private let object: Int
    /// Members taken so far: a bit per member for the first 64, an array beyond.
    private var takenBits: UInt64 = 0
    private var takenOverflow: [Bool]
    private var remaining: Int

    /// Reads the value at `index` as an object at `path`; a non-object is a violation and reads as empty.
    init?(_ document: JSONDocument, _ index: Int, at path: String, violations: inout Violations) {
        guard document.kind(of: index) == .object else {
            violations.add(path, "expected an object, got \(document.typeName(of: index))")
            return nil
        }
        self.document = document
        self.path = path
        self.object = index
        let count = document.count(of: index)
        self.takenOverflow = count > 64 ? [Bool](repeating: false, count: count) : []
        self.remaining = count
    }

    private func isTaken(_ index: Int) -> Bool {
        index < 64 ? self.takenBits & (1 << UInt64(index)) != 0 : self.takenOverflow[index]
    }

    private mutating func markTaken(_ index: Int) {
        if index < 64 { self.takenBits |= 1 << UInt64(index) } else { self.takenOverflow[index] = true }
        self.remaining -= 1
    }

    /// The value (its entry in `document`) of field `name` (snake_case), under either spelling.
    /// Objects are small (a few dozen members at most), so a scan beats hashing.
    mutating func take(_ name: String, violations: inout Violations) -> Int? {
        guard self.remaining > 0 else { return nil }
        var name = name
        let count = self.document.count(of: self.object)
        var first: Int? = nil
        var twice = false
        name.withUTF8 { utf8 in
            var key = self.object + 1
            for index in 0..<count {
                if !self.isTaken(index) && self.document.key(at: key, isField: utf8) {
                    if first == nil { first = key + 1 } else { twice = true }
                    self.markTaken(index)
                }
                key = self.document.end(of: key + 1)
            }
        }
        if twice {
            violations.add(self.field(name), "given twice, as \"\(name)\" and \"\(Self.lowerCamelCase(name))\"")
        }
        return first
    }

    /// The path of field `name` below this object.
    func field(_ name: String) -> String { "\(self.path).\(name)" }

    /// Reports every field that was not taken.
    func finish(violations: inout Violations) {
        guard self.remaining > 0 else { return }
        for (index, member) in self.document.members(of: self.object).enumerated() where !self.isTaken(index) {
            violations.add(self.path, "Unknown name \"\(Self.printable(self.document.string(at: member.key) ?? ""))\": Cannot find field.")
        }
    }

    // MARK: - Typed reads

    mutating func string(_ name: String, violations: inout Violations) -> String? {
        guard let value = self.take(name, violations: &violations) else { return nil }
        guard let string = self.document.string(at: value) else {
            violations.add(self.field(name), "expected a string, got \(self.document.typeName(of: value))")
            return nil
        }
        return string
    }

    mutating func bool(_ name: String, violations: inout Violations) -> Bool? {
        guard let value = self.take(name, violations: &violations) else { return nil }
        guard let bool = self.document.bool(at: value) else {
            violations.add(self.field(name), "expected a boolean, got \(self.document.typeName(of: value))")
            return nil
        }
        return bool
    }

    /// An int32, as a JSON number or (proto3 JSON) a decimal string.
    mutating func int32(_ name: String, violations: inout Violations) -> Int32? {
        guard let value = self.take(name, violations: &violations) else { return nil }
        let number = self.document.int64(at: value) ?? self.document.string(at: value).flatMap { Int64($0) }
        guard let number, let result = Int32(exactly: number) else {
            violations.add(self.field(name), "expected a 32-bit integer")
            return nil
        }
        return result
    }

    /// A double, as a JSON number.
    mutating func double(_ name: String, violations: inout Violations) -> Double? {
        guard let value = self.take(name, violations: &violations) else { return nil }
        guard let double = self.document.double(at: value) else {
            violations.add(self.field(name), "expected a number, got \(self.document.typeName(of: value))")
            return nil
        }
        return double
    }

    mutating func strings(_ name: String, violations: inout Violations) -> [String]? {
        guard let value = self.take(name, violations: &violations) else { return nil }
        guard self.document.kind(of: value) == .array else {
            violations.add(self.field(name), "expected an array of strings, got \(self.document.typeName(of: value))")
            return nil
        }
        var result: [String] = []
        for (index, element) in self.document.elements(of: value).enumerated() {
            guard let string = self.document.string(at: element) else {
                violations.add("\(self.field(name))[\(index)]", "expected a string, got \(self.document.typeName(of: element))")
                continue
            }
            result.append(string)
        }
        return result
    }

    /// A map of strings to strings (`data`, `headers`), in input order.
    mutating func stringMap(_ name: String, violations: inout Violations) -> [(key: String, value: String)]? {
        guard let value = self.take(name, violations: &violations) else { return nil }
        guard self.document.kind(of: value) == .object else {
            violations.add(self.field(name), "expected an object of strings, got \(self.document.typeName(of: value))")
            return nil
        }
        var result: [(key: String, value: String)] = []
        result.reserveCapacity(self.document.count(of: value))
        for member in self.document.members(of: value) {
            let key = self.document.string(at: member.key) ?? ""
            guard let string = self.document.string(at: member.value) else {
                violations.add(
                    "\(self.field(name)).\(Self.printable(key))",
                    "expected a string value, got \(self.document.typeName(of: member.value))"
                )
                continue
            }
            result.append((key, string))
        }
        return result
    }

    /// Field `name` as an object kept as given (a tree, for rendering); a non-object is a violation.
    mutating func jsonObject(_ name: String, violations: inout Violations) -> JSONObject? {
        guard let value = self.take(name, violations: &violations) else { return nil }
        guard self.document.kind(of: value) == .object else {
            violations.add(self.field(name), "expected an object, got \(self.document.typeName(of: value))")
            return nil
        }
        return self.document.object(at: value)
    }

    mutating func object(_ name: String, violations: inout Violations) -> ObjectReader? {
        guard let value = self.take(name, violations: &violations) else { return nil }
        return ObjectReader(self.document, value, at: self.field(name), violations: &violations)
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
        if key.utf8.count <= 64, key.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) { return key }
        let cleaned = String(String.UnicodeScalarView(key.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? "?" : $0 }))
        return cleaned.count > 64 ? String(cleaned.prefix(64)) + "..." : cleaned
    }
}
