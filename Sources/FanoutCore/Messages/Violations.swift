/// Violations collected in one pass over a message.
struct Violations {
    private(set) var all: [FieldViolation] = []

    var isEmpty: Bool { self.all.isEmpty }

    mutating func add(_ field: String, _ description: String) {
        self.all.append(FieldViolation(field: field, description: description))
    }

    /// A key as it may appear in an error: at most 64 characters, control characters replaced.
    static func printable(_ key: String) -> String {
        if key.utf8.count <= 64, key.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) { return key }
        let cleaned = String(String.UnicodeScalarView(key.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? "?" : $0 }))
        return cleaned.count > 64 ? String(cleaned.prefix(64)) + "..." : cleaned
    }
}
