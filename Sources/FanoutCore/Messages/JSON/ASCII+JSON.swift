/// The byte scans of FanoutCore's JSON parser and writer, next to them: in this module they
/// inline into the parser's loops (from FanoutModel, where the other byte tests live, they did
/// not, and a typical message took 8% more instructions to validate and render).
extension ASCII {
    /// The index of the first byte at or after `start` that a JSON string cannot hold as it is (a
    /// quote, a backslash, a control character); `bytes.count` if there is none. Eight bytes at a
    /// time, then byte by byte: the parser and the writer step over plain runs of strings with it.
    @inline(__always)
    static func firstJSONSpecialByte(in bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int {
        var sawNonASCII = false
        return Self.firstJSONSpecialByte(in: bytes, from: start, sawNonASCII: &sawNonASCII)
    }

    /// `firstJSONSpecialByte(in:from:)`, setting `sawNonASCII` if a byte over 0x7F is among those
    /// looked at (which may include up to seven after the one found).
    @inline(__always)
    static func firstJSONSpecialByte(in bytes: UnsafeBufferPointer<UInt8>, from start: Int, sawNonASCII: inout Bool) -> Int {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highBits: UInt64 = 0x8080_8080_8080_8080
        let quote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\")
        var index = start
        // A high bit for each byte of `word` that is special (and maybe for some above the first).
        @inline(__always)
        func hits(_ word: UInt64) -> UInt64 {
            let quotes = word ^ (ones &* UInt64(quote))
            let backslashes = word ^ (ones &* UInt64(backslash))
            // Exact tests: a high bit is set in a byte that is zero (a quote or backslash above),
            // or below 0x20 (bytes over 0x7F never match: `~word` clears their bit). Borrows make
            // false hits only above a true one: the lowest hit is exact.
            return (((quotes &- ones) & ~quotes) | ((backslashes &- ones) & ~backslashes) | ((word &- ones &* 0x20) & ~word)) & highBits
        }
        if let base = bytes.baseAddress {
            var seen: UInt64 = 0
            defer { if seen & highBits != 0 { sawNonASCII = true } }
            func word(at offset: Int) -> UInt64 { UInt64(littleEndian: UnsafeRawPointer(base + offset).loadUnaligned(as: UInt64.self)) }
            // Sixteen bytes a step (two independent words), then eight.
            while index + 16 <= bytes.count {
                let (first, second) = (word(at: index), word(at: index + 8))
                seen |= first | second
                let (firstHits, secondHits) = (hits(first), hits(second))
                if firstHits | secondHits != 0 {
                    return index + (firstHits != 0 ? firstHits.trailingZeroBitCount : 64 + secondHits.trailingZeroBitCount) / 8
                }
                index += 16
            }
            if index + 8 <= bytes.count {
                let word = word(at: index)
                seen |= word
                let hits = hits(word)
                if hits != 0 { return index + hits.trailingZeroBitCount / 8 }
                index += 8
            }
        }
        while index < bytes.count {
            let byte = bytes[index]
            if byte < 0x20 || byte == quote || byte == backslash { return index }
            if byte > 0x7F { sawNonASCII = true }
            index += 1
        }
        return index
    }

    /// Whether any byte is `[A-Z]`: eight ASCII bytes at a time.
    static func containsUppercase(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highBits: UInt64 = 0x8080_8080_8080_8080
        var index = 0
        if let base = bytes.baseAddress {
            while index + 8 <= bytes.count {
                let word = UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self)
                // With every byte under 0x80 nothing carries between bytes: a byte gains its high
                // bit from 0x3F added at 0x41 ("A") and from 0x25 at 0x5B (past "Z").
                if word & highBits == 0 {
                    if ((word &+ ones &* 0x3F) ^ (word &+ ones &* 0x25)) & highBits != 0 { return true }
                } else if (0..<8).contains(where: { Self.isUppercase(base[index + $0]) }) {
                    return true
                }
                index += 8
            }
        }
        return bytes[index...].contains(where: Self.isUppercase)
    }

    /// A non-negative decimal integer of at most `maximumDigits` digits (19 at most: they fit).
    static func decimal(_ bytes: UnsafeBufferPointer<UInt8>, maximumDigits: Int = 19) -> UInt64? {
        guard !bytes.isEmpty, bytes.count <= min(maximumDigits, 19), bytes.allSatisfy(Self.isDigit) else { return nil }
        return bytes.reduce(0) { $0 * 10 + UInt64($1 - UInt8(ascii: "0")) }
    }
}
