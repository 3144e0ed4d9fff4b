import Glibc

/// The fields of one object of an FCM message, one case per field, named in lowerCamelCase; the
/// snake_case spelling is derived from the case name. `ObjectReader` reads an object's members
/// once, dispatching each key to its field through `table`.
protocol ProtoField: CaseIterable, RawRepresentable, Sendable where RawValue == Int, AllCases == [Self] {
    static var table: FieldTable { get }
}

/// The names of an object's fields and a hash table from key bytes to field numbers. Keys match
/// in either proto3 JSON spelling (`collapse_key` or `collapseKey`: both are in the table) unless
/// the table is exact (APNs' `aps` dictionary, whose keys are hyphenated and case-sensitive).
struct FieldTable: Sendable {
    /// The snake_case names (or the exact keys), by field number.
    let names: [String]
    /// The lowerCamelCase names, by field number (the same as `names` for an exact table).
    let camelCaseNames: [String]
    /// Every spelling's UTF-8, back to back, and per slot where its spelling starts and ends.
    private let spellings: [UInt8]
    private let slots: [Slot]

    private struct Slot: Sendable {
        /// -1: an empty slot.
        var field = -1
        var hash: UInt64 = 0
        var start: Int32 = 0
        var end: Int32 = 0
    }

    /// A table of `Field`'s cases, spelled snake_case or lowerCamelCase.
    init<Field: ProtoField>(_: Field.Type) {
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
                let hash = bytes.withUnsafeBufferPointer(Self.hash)
                var slot = Int(truncatingIfNeeded: hash) & (size - 1)
                while slots[slot].field >= 0 { slot = (slot + 1) & (size - 1) }
                slots[slot] = Slot(field: field, hash: hash, start: Int32(spellings.count), end: Int32(spellings.count + bytes.count))
                spellings.append(contentsOf: bytes)
            }
        }
        self.spellings = spellings
        self.slots = slots
    }

    /// The field a key names, or `nil` for a key the object does not have.
    func field(named key: UnsafeBufferPointer<UInt8>) -> Int? {
        let hash = Self.hash(key)
        return self.slots.withUnsafeBufferPointer { slots in
            self.spellings.withUnsafeBufferPointer { spellings in
                let mask = slots.count - 1
                var index = Int(truncatingIfNeeded: hash) & mask
                while true {
                    let slot = slots[index]
                    guard slot.field >= 0 else { return nil }
                    if slot.hash == hash, Int(slot.end - slot.start) == key.count,
                        key.isEmpty || memcmp(key.baseAddress!, spellings.baseAddress! + Int(slot.start), key.count) == 0
                    {
                        return slot.field
                    }
                    index = (index + 1) & mask
                }
            }
        }
    }

    /// The key's bytes, eight at a time, multiplied and folded, with its length.
    private static func hash(_ key: UnsafeBufferPointer<UInt8>) -> UInt64 {
        var hash = UInt64(key.count) &* 0x9E37_79B9_7F4A_7C15
        guard let base = key.baseAddress else { return hash }
        var index = 0
        while index + 8 <= key.count {
            hash = (hash ^ UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self)) &* 0xFF51_AFD7_ED55_8CCD
            index += 8
        }
        var tail: UInt64 = 0
        while index < key.count {
            tail = tail << 8 | UInt64(base[index])
            index += 1
        }
        hash = (hash ^ tail) &* 0xFF51_AFD7_ED55_8CCD
        return hash ^ (hash >> 29)
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
