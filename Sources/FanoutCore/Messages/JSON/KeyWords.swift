/// A key's first and last eight bytes, read with two loads (they overlap for keys under 16 bytes;
/// a key under 8 bytes is both, zero-extended) and its length. Equal keys have equal words, and
/// keys of at most 16 bytes are equal exactly when their words are: object keys are matched and
/// told apart with a few integer compares, with `memcmp` only for longer ones.
struct KeyWords: Equatable {
    var head: UInt64
    var tail: UInt64
    var count: Int

    /// The words of `bytes[start..<start + count]`. Bytes of `bytes` before `start` may be read
    /// (never written or kept) so that a short key takes one load.
    @inline(__always)
    init(_ bytes: UnsafeBufferPointer<UInt8>, start: Int, count: Int) {
        self.count = count
        guard let base = bytes.baseAddress else {
            (self.head, self.tail) = (0, 0)
            return
        }
        let end = start + count
        if count >= 8 {
            self.head = UInt64(littleEndian: UnsafeRawPointer(base + start).loadUnaligned(as: UInt64.self))
            self.tail = UInt64(littleEndian: UnsafeRawPointer(base + end - 8).loadUnaligned(as: UInt64.self))
            return
        }
        var word: UInt64 = 0
        if end >= 8 {
            // The eight bytes ending with the key; the ones before it shifted out.
            word = UInt64(littleEndian: UnsafeRawPointer(base + end - 8).loadUnaligned(as: UInt64.self)) >> UInt64((8 - count) * 8)
        } else {
            for index in stride(from: end - 1, through: start, by: -1) { word = word << 8 | UInt64(base[index]) }
        }
        (self.head, self.tail) = (word, word)
    }

    /// The words of a whole buffer (a decoded key).
    init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.init(bytes, start: 0, count: bytes.count)
    }

    /// The words of the key (or string) at `index`, compared decoded.
    @inline(__always)
    init(_ document: JSONDocument, _ index: Int) {
        let entry = document.entries[index]
        if entry.isEscaped {
            self = document.withStringBytes(entry) { KeyWords($0) }
        } else {
            self.init(document.bytes, start: Int(entry.start), count: Int(entry.length))
        }
    }

    /// Whether keys with these words are equal without comparing their bytes.
    var identifiesKey: Bool { self.count <= 16 }

    /// A hash of the words for tables: equal keys hash equal.
    var hash: UInt64 {
        let mixed = (self.head ^ (self.tail &* 0x9E37_79B9_7F4A_7C15) ^ UInt64(truncatingIfNeeded: self.count)) &* 0xFF51_AFD7_ED55_8CCD
        return mixed ^ (mixed >> 29)
    }
}
