/// The names of a few headers (`Header`'s cases, in order), lowercase and at most 16 bytes each,
/// matched in any ASCII case with two word compares each: a key's `KeyWords`, with the case bit of
/// every letter position forced on, equal a name's words exactly when the key is the name in some case.
struct HeaderNames<Header: RawRepresentable<Int>>: Sendable {
    private struct Name: Sendable {
        var words: KeyWords
        /// 0x20 at each byte that is a letter of the name, laid out as `words` are.
        var letters: KeyWords
    }

    private let names: [Name]

    /// The name of each case of `Header` by raw value: lowercase letters, digits and hyphens, at
    /// most 16 bytes each.
    init(_ names: [StaticString]) {
        self.names = names.map { name in
            name.withUTF8Buffer { bytes in
                precondition(bytes.count <= 16 && !bytes.contains(where: ASCII.isUppercase), "\(name): a lowercase name of at most 16 bytes")
                let letters = bytes.map { $0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z") ? UInt8(0x20) : 0 }
                return Name(words: KeyWords(bytes), letters: letters.withUnsafeBufferPointer { KeyWords($0) })
            }
        }
    }

    /// The header whose name `bytes` spell in some case, if any.
    @inline(__always)
    func header(named bytes: UnsafeBufferPointer<UInt8>) -> Header? {
        guard bytes.count <= 16 else { return nil }
        let key = KeyWords(bytes)
        let index = self.names.firstIndex { name in
            name.words.count == key.count && key.head | name.letters.head == name.words.head
                && key.tail | name.letters.tail == name.words.tail
        }
        return index.flatMap(Header.init(rawValue:))
    }
}
