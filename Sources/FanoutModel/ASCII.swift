/// Byte-level character classes used by the validators. Everything here works on UTF-8 bytes, so
/// validation is one pass with no `Character` or regex machinery.
package enum ASCII {
    /// `0x21...0x7E`: visible ASCII, no space, no control characters.
    @inline(__always)
    package static func isVisible(_ byte: UInt8) -> Bool { byte >= 0x21 && byte <= 0x7E }

    /// `[A-Za-z0-9]`
    @inline(__always)
    package static func isAlphanumeric(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
            || Self.isUppercase(byte)
            || Self.isDigit(byte)
    }

    /// `[A-Z]`
    @inline(__always)
    package static func isUppercase(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") }

    /// `byte` with an ASCII capital letter lowercased.
    @inline(__always)
    package static func lowercased(_ byte: UInt8) -> UInt8 { Self.isUppercase(byte) ? byte + 32 : byte }

    /// The index of the first byte at or after `start` that a JSON string cannot hold as it is (a
    /// quote, a backslash, a control character); `bytes.count` if there is none. Eight bytes at a
    /// time, then byte by byte: the parser and the writer step over plain runs of strings with it.
    @inline(__always)
    package static func firstJSONSpecialByte(in bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int {
        var sawNonASCII = false
        return Self.firstJSONSpecialByte(in: bytes, from: start, sawNonASCII: &sawNonASCII)
    }

    /// `firstJSONSpecialByte(in:from:)`, setting `sawNonASCII` if a byte over 0x7F is among those
    /// looked at (which may include up to seven after the one found).
    @inline(__always)
    package static func firstJSONSpecialByte(in bytes: UnsafeBufferPointer<UInt8>, from start: Int, sawNonASCII: inout Bool) -> Int {
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
    package static func containsUppercase(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
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

    /// Whether `bytes` start with `prefix`, byte for byte.
    package static func hasPrefix(_ bytes: UnsafeBufferPointer<UInt8>, _ prefix: StaticString) -> Bool {
        prefix.withUTF8Buffer { prefix in bytes.count >= prefix.count && (0..<prefix.count).allSatisfy { bytes[$0] == prefix[$0] } }
    }

    /// A non-negative decimal integer of at most `maximumDigits` digits (19 at most: they fit).
    package static func decimal(_ bytes: UnsafeBufferPointer<UInt8>, maximumDigits: Int = 19) -> UInt64? {
        guard !bytes.isEmpty, bytes.count <= min(maximumDigits, 19), bytes.allSatisfy(Self.isDigit) else { return nil }
        return bytes.reduce(0) { $0 * 10 + UInt64($1 - UInt8(ascii: "0")) }
    }

    /// `[0-9]`
    @inline(__always)
    package static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    /// `[0-9a-fA-F]`
    @inline(__always)
    package static func isHexDigit(_ byte: UInt8) -> Bool {
        Self.isDigit(byte)
            || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "f"))
            || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "F"))
    }

    /// True when every byte is visible ASCII and the length is in `lengths`.
    package static func isVisibleString(_ string: String, lengths: ClosedRange<Int>) -> Bool {
        let utf8 = string.utf8
        guard lengths.contains(utf8.count) else { return false }
        // Native strings are contiguous: one branch-free pass that the compiler vectorises.
        if let result = utf8.withContiguousStorageIfAvailable(Self.allVisible) {
            return result
        }
        return utf8.allSatisfy(Self.isVisible)
    }

    private static func allVisible(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var outside: UInt8 = 0
        for byte in bytes {
            // 0x21...0x7E maps to 0...0x5D; everything else to more.
            outside |= (byte &- 0x21) > 0x5D ? 1 : 0
        }
        return outside == 0
    }

    /// True when the string has no control characters (C0, DEL) and at most `maxBytes` UTF-8 bytes.
    package static func isPrintableText(_ string: String, maxBytes: Int) -> Bool {
        var count = 0
        for byte in string.utf8 {
            if byte < 0x20 || byte == 0x7F { return false }
            count += 1
            if count > maxBytes { return false }
        }
        return true
    }
}
