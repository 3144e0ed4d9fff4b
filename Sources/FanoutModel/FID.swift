/// A Firebase Installation ID: 22 characters of URL-safe base64 whose first character is `c`, `d`,
/// `e` or `f` (`^[cdef][A-Za-z0-9_-]{21}$`), or, in projects that accept them, a legacy Instance ID
/// that an app migrated to Firebase Installations kept as its FID: 11 characters of the same form
/// (`^[cdef][A-Za-z0-9_-]{10}$`, fcm-rules.md section 6).
///
/// Stored packed (132 bits in 18 bytes, no heap allocation), because the registry holds millions.
public struct FID: Hashable, Sendable, CustomStringConvertible {
    // Characters 0...9 (60 bits), 10...19 (60 bits) and 20...21 (12 bits), 6 bits each. A legacy
    // Instance ID keeps characters 0...9 in `high`, character 10 in `middle`, and sets bit 15 of
    // `low` (never set by a modern FID, whose `low` uses 12 bits).
    private var high: UInt64
    private var middle: UInt64
    private var low: UInt16

    private static let legacyFlag: UInt16 = 0x8000

    /// "cAAAAAAAAAAAAAAAAAAAAA": a valid FID that stands in a storage slot holding none (the
    /// registry's free records), never one given to an installation by that storage.
    package static let placeholder = FID(high: 28 << 54, middle: 0, low: 0)

    private init(high: UInt64, middle: UInt64, low: UInt16) {
        self.high = high
        self.middle = middle
        self.low = low
    }

    /// Whether this is an 11-character legacy Instance ID.
    public var isLegacyInstanceID: Bool { self.low & Self.legacyFlag != 0 }

    /// The length of its text: 22, or 11 for a legacy Instance ID.
    public var utf8Count: Int { self.isLegacyInstanceID ? 11 : 22 }

    /// Validates `string` as a legacy 11-character Instance ID (`^[cdef][A-Za-z0-9_-]{10}$`).
    public init?(legacyInstanceID string: String) {
        let bytes = Array(string.utf8)
        guard bytes.count == 11 else { return nil }
        var high: UInt64 = 0
        for index in 0..<10 {
            guard let value = Self.sextet(of: bytes[index]), index != 0 || (28...31).contains(value) else { return nil }
            high = high << 6 | UInt64(value)
        }
        guard let last = Self.sextet(of: bytes[10]) else { return nil }
        self.high = high
        self.middle = UInt64(last)
        self.low = Self.legacyFlag
    }

    /// A modern FID, or when `allowingLegacy` a legacy Instance ID too.
    public init?(_ string: String, allowingLegacy: Bool) {
        if let fid = FID(string) {
            self = fid
        } else if allowingLegacy, let fid = FID(legacyInstanceID: string) {
            self = fid
        } else {
            return nil
        }
    }

    /// Validates `string` as a modern FID; `nil` when it is not one.
    public init?(_ string: String) {
        var string = string
        guard let fid = string.withUTF8({ FID(utf8: UnsafeRawBufferPointer($0)) }) else { return nil }
        self = fid
    }

    /// Validates 22 bytes of UTF-8 as a modern FID (from a frame or a file, without a `String`).
    /// Each character is looked up in `sextets` (a branch per character class mispredicted on
    /// random FIDs: 6% of a delivery worker's CPU while it decoded DELIVERIES frames).
    public init?(utf8 bytes: UnsafeRawBufferPointer) {
        guard bytes.count == 22 else { return nil }
        let fid: FID? = Self.sextets.withUnsafeBufferPointer { sextets in
            var seen: UInt8 = 0
            var high: UInt64 = 0
            for index in 0..<10 {
                let value = sextets[Int(bytes[index])]
                seen |= value
                high = high << 6 | UInt64(value)
            }
            var middle: UInt64 = 0
            for index in 10..<20 {
                let value = sextets[Int(bytes[index])]
                seen |= value
                middle = middle << 6 | UInt64(value)
            }
            let last = (sextets[Int(bytes[20])], sextets[Int(bytes[21])])
            seen |= last.0 | last.1
            // c, d, e, f are 28...31: the first character's top four bits are 0111.
            guard seen & Self.invalid == 0, high >> 56 == 0b0111 else { return nil }
            return FID(high: high, middle: middle, low: UInt16(last.0) << 6 | UInt16(last.1))
        }
        guard let fid else { return nil }
        self = fid
    }

    /// The packed form (132 bits), for compact binary encodings such as the write-ahead log.
    package var packed: (high: UInt64, middle: UInt64, low: UInt16) { (self.high, self.middle, self.low) }

    /// A FID from its packed form; `nil` when the bits are not a valid FID (header bits, ranges).
    package init?(packed: (high: UInt64, middle: UInt64, low: UInt16)) {
        // Characters 0...9 and 10...19 use 60 bits each, 20...21 use 12; the first is c-f. A
        // legacy Instance ID: 60 bits, one character, the flag and nothing else.
        let legacy = packed.low == Self.legacyFlag
        guard packed.high >> 60 == 0, legacy ? packed.middle >> 6 == 0 : packed.middle >> 60 == 0,
            legacy || packed.low >> 12 == 0,
            (28...31).contains(packed.high >> 54)
        else { return nil }
        self.high = packed.high
        self.middle = packed.middle
        self.low = packed.low
    }

    /// The string form: 22 characters (11 for a legacy Instance ID).
    public var string: String {
        self.withUTF8 { String(decoding: $0, as: UTF8.self) }
    }

    /// Calls `body` with the characters' bytes (22, or 11 for a legacy Instance ID), without
    /// allocating (for encoders).
    public func withUTF8<Result, Failure: Error>(_ body: (UnsafeBufferPointer<UInt8>) throws(Failure) -> Result) throws(Failure) -> Result {
        var characters: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes of room on the stack
        if self.isLegacyInstanceID {
            return try withUnsafeMutableBytes(of: &characters) { (raw: UnsafeMutableRawBufferPointer) throws(Failure) -> Result in
                var high = self.high
                raw[10] = Self.alphabet[Int(self.middle & 0x3F)]
                for index in stride(from: 9, through: 0, by: -1) {
                    raw[index] = Self.alphabet[Int(high & 0x3F)]
                    high >>= 6
                }
                return try body(UnsafeBufferPointer(start: raw.baseAddress!.assumingMemoryBound(to: UInt8.self), count: 11))
            }
        }
        return try withUnsafeMutableBytes(of: &characters) { (raw: UnsafeMutableRawBufferPointer) throws(Failure) -> Result in
            // Each word's characters by shifts from the word itself: a loop over all 22 with a
            // switch on the position ran ~2% of the server's CPU writing DELIVERIES frames.
            let alphabet = Self.alphabet
            for index in 0..<10 {
                raw[index] = alphabet[Int(self.high >> UInt64(54 - 6 * index) & 0x3F)]
                raw[10 + index] = alphabet[Int(self.middle >> UInt64(54 - 6 * index) & 0x3F)]
            }
            raw[20] = alphabet[Int(self.low >> 6 & 0x3F)]
            raw[21] = alphabet[Int(self.low & 0x3F)]
            return try body(UnsafeBufferPointer(start: raw.baseAddress!.assumingMemoryBound(to: UInt8.self), count: 22))
        }
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

    /// The 64 characters, read from the literal itself: an array in a `static let` cost a lazy
    /// initialisation check (`swift_once`) for each of a FID's 22 characters, 2.5% of the
    /// server's CPU while it streamed deliveries.
    private static var alphabet: UnsafePointer<UInt8> {
        ("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_" as StaticString).utf8Start
    }

    @inline(__always)
    private static func sextet(of byte: UInt8) -> UInt8? {
        let value = Self.sextets[Int(byte)]
        return value & Self.invalid == 0 ? value : nil
    }

    /// `sextets`' entry for a byte outside the alphabet (no sextet has this bit).
    private static let invalid: UInt8 = 0x80

    /// Each byte's six bits as a base64url character, or `invalid`. Read once per FID
    /// (`withUnsafeBufferPointer`), not per character: each read of a `static let` checks its
    /// lazy initialisation.
    private static let sextets: [UInt8] = (0...255).map { (byte: Int) -> UInt8 in
        switch UInt8(byte) {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): UInt8(byte) - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): UInt8(byte) - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt8(byte) - UInt8(ascii: "0") + 52
        case UInt8(ascii: "-"): 62
        case UInt8(ascii: "_"): 63
        default: Self.invalid
        }
    }
}
