internal import CFanoutOpenSSL

/// SHA-256 from system libcrypto (`EVP_Digest`), and constant-time comparison (`CRYPTO_memcmp`).
public enum SHA256 {
    /// The digest of `bytes`: 32 bytes. Read in place when the collection's storage is contiguous
    /// (an array, `Data`, a native string's UTF-8), copied into an array otherwise.
    public static func hash(_ bytes: some Collection<UInt8>) -> [UInt8] {
        if let digest = bytes.withContiguousStorageIfAvailable({ Self.hash(bytes: UnsafeRawBufferPointer($0)) }) {
            return digest
        }
        return Array(bytes).withUnsafeBytes { Self.hash(bytes: $0) }
    }

    private static func hash(bytes input: UnsafeRawBufferPointer) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let status = digest.withUnsafeMutableBytes { output in
            EVP_Digest(input.baseAddress, input.count, output.baseAddress, &length, EVP_sha256(), nil)
        }
        // EVP_Digest with SHA-256 fails only when libcrypto cannot allocate; a zeroed digest then
        // matches nothing a key hashes to.
        if status != 1 { return [UInt8](repeating: 0, count: 32) }
        return digest
    }

    /// Whether `a` and `b` are equal, in time that depends only on their lengths.
    public static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        if a.isEmpty { return true }
        return a.withUnsafeBytes { a in
            b.withUnsafeBytes { b in CRYPTO_memcmp(a.baseAddress, b.baseAddress, a.count) == 0 }
        }
    }

    /// Lowercase hex digits of `bytes`.
    public static func hex(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// The bytes of lowercase or uppercase hex digits; nil when `text` is not hex.
    public static func bytes(hex text: some StringProtocol) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        func value(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
            default: return nil
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count / 2)
        var index = 0
        while index < utf8.count {
            guard let high = value(utf8[index]), let low = value(utf8[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }
}
