/// A Firebase Installation ID: 22 characters of URL-safe base64 whose first character is `c`, `d`,
/// `e` or `f` (`^[cdef][A-Za-z0-9_-]{21}$`).
///
/// Stored packed (132 bits in 18 bytes, no heap allocation), because the registry holds millions.
/// Legacy 11-character Instance IDs are not FIDs here (fcm-rules.md section 9).
public struct FID: Hashable, Sendable, CustomStringConvertible {
    // Characters 0...9 (60 bits), 10...19 (60 bits) and 20...21 (12 bits), 6 bits each.
    private var high: UInt64
    private var middle: UInt64
    private var low: UInt16

    /// Validates `string` as a modern FID; `nil` when it is not one.
    public init?(_ string: String) {
        var high: UInt64 = 0
        var middle: UInt64 = 0
        var low: UInt16 = 0
        var index = 0
        for byte in string.utf8 {
            guard index < 22, let value = Self.sextet(of: byte) else { return nil }
            if index == 0 {
                // c, d, e, f are 28...31: the top four bits are 0111.
                guard value >= 28 && value <= 31 else { return nil }
            }
            switch index {
            case 0..<10: high = high << 6 | UInt64(value)
            case 10..<20: middle = middle << 6 | UInt64(value)
            default: low = low << 6 | UInt16(value)
            }
            index += 1
        }
        guard index == 22 else { return nil }
        self.high = high
        self.middle = middle
        self.low = low
    }

    /// The packed form (132 bits), for compact binary encodings such as the write-ahead log.
    package var packed: (high: UInt64, middle: UInt64, low: UInt16) { (self.high, self.middle, self.low) }

    /// A FID from its packed form; `nil` when the bits are not a valid FID (header bits, ranges).
    package init?(packed: (high: UInt64, middle: UInt64, low: UInt16)) {
        // Characters 0...9 and 10...19 use 60 bits each, 20...21 use 12; the first is c-f.
        guard packed.high >> 60 == 0, packed.middle >> 60 == 0, packed.low >> 12 == 0,
            (28...31).contains(packed.high >> 54)
        else { return nil }
        self.high = packed.high
        self.middle = packed.middle
        self.low = packed.low
    }

    /// The 22-character string form.
    public var string: String {
        var characters = [UInt8](repeating: 0, count: 22)
        var high = self.high
        var middle = self.middle
        var low = self.low
        for index in stride(from: 21, through: 0, by: -1) {
            let value: Int
            switch index {
            case 20...21:
                value = Int(low & 0x3F)
                low >>= 6
            case 10..<20:
                value = Int(middle & 0x3F)
                middle >>= 6
            default:
                value = Int(high & 0x3F)
                high >>= 6
            }
            characters[index] = Self.alphabet[value]
        }
        return String(decoding: characters, as: UTF8.self)
    }

    public var description: String { self.string }

    // MARK: - Generation

    /// The FID that FIS derives from 17 random bytes (exposed for tests; the header bits are set here).
    package static func make(fromRandomBytes randomBytes: [UInt8]) -> FID {
        var bytes = randomBytes
        bytes[0] = 0b0111_0000 | (bytes[0] & 0b0000_1111)
        // Base64 takes 6 bits at a time from the front; 22 characters use the first 132 bits.
        var characters = [UInt8]()
        characters.reserveCapacity(22)
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in bytes {
            accumulator = accumulator << 8 | UInt32(byte)
            bits += 8
            while bits >= 6 && characters.count < 22 {
                bits -= 6
                characters.append(Self.alphabet[Int((accumulator >> UInt32(bits)) & 0x3F)])
            }
        }
        // The alphabet and header guarantee a valid FID.
        return FID(String(decoding: characters, as: UTF8.self))!
    }

    // MARK: - Base64url

    private static let alphabet: [UInt8] = Array(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8
    )

    @inline(__always)
    private static func sextet(of byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return byte - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return byte - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0") + 52
        case UInt8(ascii: "-"): return 62
        case UInt8(ascii: "_"): return 63
        default: return nil
        }
    }
}
