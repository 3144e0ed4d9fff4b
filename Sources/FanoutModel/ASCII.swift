/// Byte-level character classes used by the validators. Everything here works on UTF-8 bytes, so
/// validation is one pass with no `Character` or regex machinery. The byte tests are `@inlinable`:
/// FanoutCore's parser and writer call them per byte from another module.
@usableFromInline
package enum ASCII {
    /// `0x21...0x7E`: visible ASCII, no space, no control characters.
    @inline(__always)
    @inlinable
    package static func isVisible(_ byte: UInt8) -> Bool { byte >= 0x21 && byte <= 0x7E }

    /// `[A-Za-z0-9]`
    @inline(__always)
    @inlinable
    package static func isAlphanumeric(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
            || Self.isUppercase(byte)
            || Self.isDigit(byte)
    }

    /// `[A-Z]`
    @inline(__always)
    @inlinable
    package static func isUppercase(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") }

    /// `byte` with an ASCII capital letter lowercased.
    @inline(__always)
    @inlinable
    package static func lowercased(_ byte: UInt8) -> UInt8 { Self.isUppercase(byte) ? byte + 32 : byte }

    /// Whether `bytes` start with `prefix`, byte for byte.
    @inlinable
    package static func hasPrefix(_ bytes: UnsafeBufferPointer<UInt8>, _ prefix: StaticString) -> Bool {
        prefix.withUTF8Buffer { prefix in bytes.count >= prefix.count && (0..<prefix.count).allSatisfy { bytes[$0] == prefix[$0] } }
    }

    /// `[0-9]`
    @inline(__always)
    @inlinable
    package static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    /// `[0-9a-fA-F]`
    @inline(__always)
    @inlinable
    package static func isHexDigit(_ byte: UInt8) -> Bool {
        Self.isDigit(byte)
            || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "f"))
            || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "F"))
    }

    /// True when every byte is visible ASCII and the length is in `lengths`.
    package static func isVisibleString(_ string: String, lengths: ClosedRange<Int>) -> Bool {
        let utf8 = string.utf8
        guard lengths.contains(utf8.count) else { return false }
        if let result = utf8.withContiguousStorageIfAvailable({ Self.allVisible(UnsafeRawBufferPointer($0)) }) {
            return result
        }
        return utf8.allSatisfy(Self.isVisible)
    }

    /// True when every byte is visible ASCII and the count is in `lengths`.
    package static func isVisibleBytes(_ bytes: UnsafeRawBufferPointer, lengths: ClosedRange<Int>) -> Bool {
        lengths.contains(bytes.count) && Self.allVisible(bytes)
    }

    /// True when every byte is visible ASCII (none: true).
    package static func isVisibleBytes(_ bytes: UnsafeRawBufferPointer) -> Bool {
        Self.allVisible(bytes)
    }

    /// 16 bytes at a time: 0x21...0x7E maps to 0...0x5D, everything else to more, and a mask
    /// collects the lanes above; a tail of a longer run is its last 16 bytes again. (A
    /// byte-at-a-time loop was not vectorised: a 163-byte token cost a client decoding DELIVERIES
    /// frames 10% of its CPU. `pointwiseMax` over the lanes compiled to a call per 16 bytes; the
    /// comparison compiles in place, and a token's check runs in three quarters of the time.)
    private static func allVisible(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let offset = SIMD16<UInt8>(repeating: 0x21)
        let limit = SIMD16<UInt8>(repeating: 0x5D)
        guard bytes.count >= 16 else {
            return bytes.allSatisfy { $0 &- 0x21 <= 0x5D }
        }
        var above = SIMDMask<SIMD16<Int8>>(repeating: false)
        var index = 0
        while index + 16 <= bytes.count {
            above .|= (bytes.loadUnaligned(fromByteOffset: index, as: SIMD16<UInt8>.self) &- offset) .> limit
            index += 16
        }
        if index < bytes.count {
            above .|= (bytes.loadUnaligned(fromByteOffset: bytes.count - 16, as: SIMD16<UInt8>.self) &- offset) .> limit
        }
        return !any(above)
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
