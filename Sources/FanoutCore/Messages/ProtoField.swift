import Glibc

/// The fields of one object of an FCM message, one case per field, named in lowerCamelCase; the
/// snake_case spelling is derived from the case name. `ObjectReader` reads an object's members
/// once, dispatching each key to its field through `table`.
protocol ProtoField: CaseIterable, RawRepresentable, Sendable where RawValue == Int, AllCases == [Self] {
    /// Room for a value entry per field, sized to the cases: a reader is copied as it is handed
    /// around, and most objects have a few fields.
    associatedtype Values: FieldValues
    static var table: FieldTable { get }
}

/// Fixed storage for an `ObjectReader`'s value entries, one per field.
protocol FieldValues {
    var count: Int { get }
    init(repeating: Int32)
    subscript(field index: Int) -> Int32 { get set }
}

extension InlineArray: FieldValues where Element == Int32 {
    /// Unchecked: a field number is a case's raw value or comes from the field's table, and
    /// `FieldTable.init` checks that every case has room.
    subscript(field index: Int) -> Int32 {
        get { unsafe self[unchecked: index] }
        set { unsafe self[unchecked: index] = newValue }
    }
}

/// The names of an object's fields and a hash table from key bytes to field numbers. Keys match
/// in either proto3 JSON spelling (`collapse_key` or `collapseKey`: both are in the table) unless
/// the table is exact (APNs' `aps` dictionary, whose keys are hyphenated and case-sensitive).
struct FieldTable: Sendable {
    /// The snake_case names (or the exact keys), by field number.
    let names: [String]
    /// The lowerCamelCase names, by field number (the same as `names` for an exact table).
    let camelCaseNames: [String]
    /// Every spelling's UTF-8, back to back, for keys too long for their words to identify them.
    private let spellings: [UInt8]
    private let slots: [Slot]

    private struct Slot: Sendable {
        /// -1: an empty slot.
        var field = -1
        var head: UInt64 = 0
        var tail: UInt64 = 0
        var count = 0
        /// Where the spelling starts in `spellings`.
        var start = 0
    }

    /// A table of `Field`'s cases, spelled snake_case or lowerCamelCase.
    init<Field: ProtoField>(_: Field.Type) {
        precondition(Field.allCases.count <= Field.Values(repeating: -1).count, "\(Field.self).Values has too few elements")
        let camelCase = Field.allCases.map { String(describing: $0) }
        self.init(names: camelCase.map(Self.snakeCase), camelCaseNames: camelCase)
    }

    /// A table matching exactly these keys.
    init(exactNames names: [String]) {
        self.init(names: names, camelCaseNames: names)
    }

    private init(names: [String], camelCaseNames: [String]) {
        self.names = names
        self.camelCaseNames = camelCaseNames
        var spellings: [UInt8] = []
        var size = 8
        while size < names.count * 4 { size *= 2 }
        var slots = [Slot](repeating: Slot(), count: size)
        for (field, name) in names.enumerated() {
            for spelling in Set([name, camelCaseNames[field]]) {
                let bytes = Array(spelling.utf8)
                let words = bytes.withUnsafeBufferPointer { KeyWords($0) }
                var slot = Int(truncatingIfNeeded: words.hash) & (size - 1)
                while slots[slot].field >= 0 { slot = (slot + 1) & (size - 1) }
                slots[slot] = Slot(field: field, head: words.head, tail: words.tail, count: words.count, start: spellings.count)
                spellings.append(contentsOf: bytes)
            }
        }
        self.spellings = spellings
        self.slots = slots
    }

    /// The field the key at `key` in `document` names, or `nil` for a key the object does not have.
    @inline(__always)
    func field(ofKey key: Int, in document: JSONDocument) -> Int? {
        let words = KeyWords(document, key)
        return self.slots.withUnsafeBufferPointer { slots in
            let mask = slots.count - 1
            var index = Int(truncatingIfNeeded: words.hash) & mask
            while true {
                let slot = slots[index]
                guard slot.field >= 0 else { return nil }
                if slot.head == words.head, slot.tail == words.tail, slot.count == words.count,
                    words.identifiesKey || self.spelling(of: slot, equalsKey: key, in: document)
                {
                    return slot.field
                }
                index = (index + 1) & mask
            }
        }
    }

    private func spelling(of slot: Slot, equalsKey key: Int, in document: JSONDocument) -> Bool {
        document.withStringBytes(at: key) { key in
            self.spellings.withUnsafeBufferPointer { spellings in
                guard let key = key.baseAddress, let spellings = spellings.baseAddress else { return false }
                return memcmp(key, spellings + slot.start, slot.count) == 0
            }
        }
    }

    /// `collapseKey` -> `collapse_key`.
    static func snakeCase(_ camelCase: String) -> String {
        var result = ""
        for byte in camelCase.utf8 {
            if ASCII.isUppercase(byte) {
                result.append("_")
                result.append(Character(Unicode.Scalar(byte | 0x20)))
            } else {
                result.append(Character(Unicode.Scalar(byte)))
            }
        }
        return result
    }
}
