/// Reads the fields of one JSON object as proto3's JSON mapping does: each field under its
/// snake_case name or its lowerCamelCase name (not both), unknown names reported, wrong types
/// reported with the field's path. The members are dispatched to their fields in one pass when the
/// reader is made; every problem is added to the shared `Violations`. A reader borrows its
/// document: use it only inside the `JSONParser.withDocument` call that made it.
///
/// Values are handed out as entries of the document (strings stay undecoded until someone needs
/// them), and paths are built only for violations.
struct ObjectReader<Field: ProtoField> {
    let document: JSONDocument
    /// The object's path (`message.android`).
    let path: StaticString
    /// The object's entry in `document`.
    let object: Int
    /// The value entry of each field given (-1: absent), by field number.
    private var values: Field.Values

    /// Reads the value at `index` as an object at `path`; a non-object is a violation (and no reader).
    init?(_ document: JSONDocument, _ index: Int, at path: StaticString, violations: inout Violations) {
        guard document.kind(of: index) == .object else {
            violations.add(path.description, "expected an object, got \(document.typeName(of: index))")
            return nil
        }
        self.document = document
        self.path = path
        self.object = index
        self.values = Field.Values(repeating: -1)
        let table = Field.table
        for member in document.members(of: index) {
            guard let field = table.field(ofKey: member.key, in: document) else {
                violations.add(path.description, "Unknown name \"\(Violations.printable(document.string(at: member.key) ?? ""))\": Cannot find field.")
                continue
            }
            if self.values[field: field] >= 0 {
                violations.add(
                    "\(path).\(table.names[field])",
                    "given twice, as \"\(table.names[field])\" and \"\(table.camelCaseNames[field])\""
                )
            } else {
                self.values[field: field] = Int32(member.value)
            }
        }
    }

    /// The value entry of `field`, if given.
    @inline(__always)
    func value(_ field: Field) -> Int? {
        let value = self.values[field: field.rawValue]
        return value >= 0 ? Int(value) : nil
    }

    /// The path of `field` (`message.android.ttl`).
    func path(of field: Field) -> String { "\(self.path).\(Field.table.names[field.rawValue])" }

    // MARK: - Typed reads

    /// The value entry of `field` if it is a `kind`; another kind is a violation ("expected
    /// `expected`, got ...").
    @inline(__always)
    private func value(_ field: Field, ofKind kind: JSONDocument.Kind, expected: StaticString, violations: inout Violations) -> Int? {
        guard let value = self.value(field) else { return nil }
        guard self.document.kind(of: value) == kind else {
            violations.add(self.path(of: field), "expected \(expected), got \(self.document.typeName(of: value))")
            return nil
        }
        return value
    }

    /// The entry of string field `field`; another type is a violation.
    @inline(__always)
    func string(_ field: Field, violations: inout Violations) -> Int? {
        self.value(field, ofKind: .string, expected: "a string", violations: &violations)
    }

    /// String field `field`, decoded.
    func decodedString(_ field: Field, violations: inout Violations) -> String? {
        self.string(field, violations: &violations).flatMap(self.document.string(at:))
    }

    func bool(_ field: Field, violations: inout Violations) -> Bool? {
        guard let value = self.value(field) else { return nil }
        guard let bool = self.document.bool(at: value) else {
            violations.add(self.path(of: field), "expected a boolean, got \(self.document.typeName(of: value))")
            return nil
        }
        return bool
    }

    /// An int32, as a JSON number or (proto3 JSON) a decimal string.
    func int32(_ field: Field, violations: inout Violations) -> Int32? {
        guard let value = self.value(field) else { return nil }
        guard let number = self.document.int32(at: value) else {
            violations.add(self.path(of: field), "expected a 32-bit integer")
            return nil
        }
        return number
    }

    /// A double, as a JSON number.
    func double(_ field: Field, violations: inout Violations) -> Double? {
        guard let value = self.value(field) else { return nil }
        guard let double = self.document.double(at: value) else {
            violations.add(self.path(of: field), "expected a number, got \(self.document.typeName(of: value))")
            return nil
        }
        return double
    }

    /// The entry of array field `field` if every element is a string; each other element is a violation.
    func strings(_ field: Field, violations: inout Violations) -> Int? {
        guard let value = self.value(field, ofKind: .array, expected: "an array of strings", violations: &violations) else { return nil }
        var valid = true
        for (index, element) in self.document.elements(of: value).enumerated() where self.document.kind(of: element) != .string {
            violations.add("\(self.path(of: field))[\(index)]", "expected a string, got \(self.document.typeName(of: element))")
            valid = false
        }
        return valid ? value : nil
    }

    /// The entry of map field `field` (`data`, `headers`) if every value is a string; each other
    /// value is a violation.
    func stringMap(_ field: Field, violations: inout Violations) -> Int? {
        guard let value = self.value(field, ofKind: .object, expected: "an object of strings", violations: &violations) else { return nil }
        var valid = true
        for member in self.document.members(of: value) where self.document.kind(of: member.value) != .string {
            violations.add(
                "\(self.path(of: field)).\(Violations.printable(self.document.string(at: member.key) ?? ""))",
                "expected a string value, got \(self.document.typeName(of: member.value))"
            )
            valid = false
        }
        return valid ? value : nil
    }

    /// The entry of object field `field` (kept as given); another type is a violation.
    func jsonObject(_ field: Field, violations: inout Violations) -> Int? {
        self.value(field, ofKind: .object, expected: "an object", violations: &violations)
    }

    /// A reader of object field `field`, whose path is `path` (this reader's path, a dot and the field's name).
    func object<Inner: ProtoField>(
        _ field: Field,
        as fields: Inner.Type,
        at path: StaticString,
        violations: inout Violations
    ) -> ObjectReader<Inner>? {
        guard let value = self.value(field) else { return nil }
        return ObjectReader<Inner>(self.document, value, at: path, violations: &violations)
    }
}
