@testable import FanoutModel
import FanoutTestSupport
import Testing

/// The validators that read untrusted bytes 16 at a time, against byte-by-byte references: every
/// length from empty through several chunks and a tail, with the odd byte at every position.
@Suite("Byte validation")
struct ByteValidationTests {
    /// Lengths that cover no chunk, one, several, and every tail length.
    static let lengths = Array(0...70) + [163, 255, 1024]

    @Test func utf8AgreesWithTheStandardLibrarysDecoding() {
        var random = SeededRandomNumberGenerator(seed: 29)
        // Mostly ASCII with a sprinkling of what UTF-8 gets wrong: lone continuations, overlong
        // forms, surrogates, cut-off sequences, bytes above U+10FFFF, and valid multibyte text.
        let pieces: [[UInt8]] = [
            [0x80], [0xBF], [0xC0, 0x80], [0xC1, 0xBF], [0xE0, 0x80, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80],
            [0xF5], [0xFF], [0xC3], [0xE2, 0x82], [0xC3, 0xA9], [0xE2, 0x82, 0xAC], [0xF0, 0x9F, 0x98, 0x80], [0x7F], [0x00],
        ]
        var checked = (valid: 0, invalid: 0)
        for length in Self.lengths {
            for _ in 0..<40 {
                var bytes = (0..<length).map { _ in UInt8.random(in: 0x20...0x7E, using: &random) }
                if length > 0, Bool.random(using: &random) {
                    let piece = pieces.randomElement(using: &random)!
                    let at = Int.random(in: 0..<length, using: &random)
                    bytes.replaceSubrange(at..<min(length, at + piece.count), with: piece)
                }
                let expected = String(validating: bytes, as: UTF8.self) != nil
                let actual = bytes.withUnsafeBufferPointer { UTF8Validation.isValid($0) }
                #expect(actual == expected, "\(bytes)")
                if expected { checked.valid += 1 } else { checked.invalid += 1 }
            }
        }
        #expect(checked.valid > 500 && checked.invalid > 500, "both outcomes exercised: \(checked)")
    }

    /// An APNs token, from a frame's bytes or from a `String`, is an even number of 16...200 hex
    /// digits, kept lowercase: both against a reference written here.
    @Test func apnsTokensFromBytesAgreeWithTokensFromStrings() {
        var random = SeededRandomNumberGenerator(seed: 31)
        let alphabet = Array("0123456789abcdefABCDEFgG: \u{7F}".utf8)
        var checked = (valid: 0, invalid: 0)
        for length in [0, 1, 14, 15, 16, 17, 63, 64, 65, 199, 200, 201, 202] {
            for _ in 0..<60 {
                // Hex digits of either case, and in half of them one byte from anywhere in the alphabet.
                var bytes = (0..<length).map { _ in alphabet[Int.random(in: 0..<22, using: &random)] }
                if length > 0, Bool.random(using: &random) {
                    bytes[Int.random(in: 0..<length, using: &random)] = alphabet.randomElement(using: &random)!
                }
                let hexDigits = Set("0123456789abcdefABCDEF".utf8)
                let isToken = (16...200).contains(bytes.count) && bytes.count % 2 == 0 && bytes.allSatisfy(hexDigits.contains)
                let expected = isToken ? String(decoding: bytes, as: UTF8.self).lowercased() : nil
                #expect(bytes.withUnsafeBytes { APNsDeviceToken(utf8: $0) }?.hex == expected, "\(bytes)")
                #expect(APNsDeviceToken(String(decoding: bytes, as: UTF8.self))?.hex == expected, "\(bytes)")
                if expected != nil { checked.valid += 1 } else { checked.invalid += 1 }
            }
        }
        #expect(checked.valid > 50 && checked.invalid > 500, "both outcomes exercised: \(checked)")
    }

    @Test func asciiIsNoByteAbove0x7F() {
        for length in Self.lengths {
            let ascii = [UInt8](repeating: 0x7F, count: length)
            #expect(ascii.withUnsafeBytes { UTF8Validation.isASCII($0) })
            for position in 0..<length {
                var bytes = ascii
                bytes[position] = 0x80
                #expect(!bytes.withUnsafeBytes { UTF8Validation.isASCII($0) }, "length \(length), 0x80 at \(position)")
            }
        }
    }

    @Test func visibleBytesAreExactly0x21Through0x7E() {
        let outside: [UInt8] = [0x00, 0x09, 0x20, 0x7F, 0x80, 0xA1, 0xFF]
        for length in Self.lengths where length > 0 {
            let visible = (0..<length).map { UInt8(0x21 + $0 % 0x5E) }  // every visible byte, lowest and highest
            #expect(visible.withUnsafeBytes { ASCII.isVisibleBytes($0, lengths: 1...2048) })
            for position in 0..<length {  // every position: the last 16 bytes are read twice
                for byte in outside {
                    var bytes = visible
                    bytes[position] = byte
                    #expect(
                        !bytes.withUnsafeBytes { ASCII.isVisibleBytes($0, lengths: 1...2048) },
                        "length \(length), \(byte) at \(position)"
                    )
                }
            }
        }
        #expect(![UInt8]().withUnsafeBytes { ASCII.isVisibleBytes($0, lengths: 1...2048) }, "too short")
        #expect(!Array("abc".utf8).withUnsafeBytes { ASCII.isVisibleBytes($0, lengths: 1...2) }, "too long")
    }
}
