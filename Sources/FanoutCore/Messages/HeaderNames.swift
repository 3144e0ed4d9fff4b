/// A few lowercase names of at most 16 bytes (HTTP header names), matched in any ASCII case with
/// two word compares each: a key's `KeyWords`, with the case bit of every letter position forced
/// on, equals a name's words exactly when the key is the name in some case.
struct HeaderNames: Sendable {
    private struct Name: Sendable {
        var words: KeyWords
        /// 0x20 at each byte that is a letter of the name, laid out as `words` are.
        var letters: KeyWords
    }

    private let names: [Name]

    /// Names of lowercase letters, digits and hyphens, at most 16 bytes each.
    init(_ names: [StaticString]) {
        self.names = names.map { name in
            name.withUTF8Buffer { bytes in
                precondition(bytes.count <= 16 && !bytes.contains(where: ASCII.isUppercase), "\(name): a lowercase name of at most 16 bytes")
                let letters = bytes.map { $0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z") ? UInt8(0x20) : 0 }
                return Name(words: KeyWords(bytes), letters: letters.withUnsafeBufferPointer { KeyWords($0) })
            }
        }
    }

    /// The position in the list of the name `bytes` spell in some case, or `nil`.
    @inline(__always)
    func index(of bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        guard bytes.count <= 16 else { return nil }
        let key = KeyWords(bytes)
        return self.names.firstIndex { name in
            name.words.count == key.count && key.head | name.letters.head == name.words.head
                && key.tail | name.letters.tail == name.words.tail
        }
    }
}
