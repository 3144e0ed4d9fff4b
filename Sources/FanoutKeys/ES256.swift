internal import CFanoutOpenSSL

/// A P-256 key for ES256 (ECDSA with SHA-256, signatures as the 64 bytes r ‖ s of RFC 7518
/// section 3.4), made, read and used with system libcrypto.
public final class ES256Key: @unchecked Sendable {
    // An EVP_PKEY is safe to use from several threads for signing and verifying (OpenSSL 3).
    private let key: OpaquePointer
    /// Whether it holds the private half (it can sign).
    public let canSign: Bool

    private init(key: OpaquePointer, canSign: Bool) {
        self.key = key
        self.canSign = canSign
    }

    deinit { EVP_PKEY_free(self.key) }

    public static func generate() throws(CryptoError) -> ES256Key {
        ES256Key(key: try generateP256Key(), canSign: true)
    }

    /// A key from PEM: a private key (PKCS #8 or SEC 1) or, with `isPublic`, a public key.
    public init(pem: String, isPublic: Bool = false) throws(CryptoError) {
        let key = try readKeyPEM(pem, isPublic: isPublic)
        guard EVP_PKEY_get_base_id(key) == EVP_PKEY_EC, EVP_PKEY_get_bits(key) == 256 else {
            EVP_PKEY_free(key)
            throw CryptoError("not a P-256 key")
        }
        self.key = key
        self.canSign = !isPublic
    }

    public func privateKeyPEM() throws(CryptoError) -> String { try pemOfPrivateKey(self.key) }
    public func publicKeyPEM() throws(CryptoError) -> String { try pemOfPublicKey(self.key) }

    /// The public point's coordinates, 32 bytes each (for the JWK).
    public func publicCoordinates() throws(CryptoError) -> (x: [UInt8], y: [UInt8]) {
        var point = [UInt8](repeating: 0, count: 65)
        var length = 0
        guard EVP_PKEY_get_octet_string_param(self.key, "pub", &point, point.count, &length) == 1, length == 65, point[0] == 4 else {
            throw CryptoError("reading the public point")
        }
        return (Array(point[1..<33]), Array(point[33..<65]))
    }

    /// The ES256 signature of `message`: r ‖ s, 64 bytes.
    public func sign(_ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard self.canSign else { throw CryptoError("a public key cannot sign") }
        guard let context = EVP_MD_CTX_new() else { throw CryptoError("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(context) }
        var der = [UInt8](repeating: 0, count: 80)
        var length = der.count
        let signed = message.withUnsafeBytes { message in
            EVP_DigestSignInit(context, nil, EVP_sha256(), nil, self.key) == 1
                && EVP_DigestSign(context, &der, &length, message.baseAddress?.assumingMemoryBound(to: UInt8.self), message.count) == 1
        }
        guard signed else { throw CryptoError("EVP_DigestSign") }
        var pointer: UnsafePointer<UInt8>? = der.withUnsafeBufferPointer { $0.baseAddress }
        // d2i reads from `der` while it is alive (this scope).
        let signature = withExtendedLifetime(der) { d2i_ECDSA_SIG(nil, &pointer, length) }
        guard let signature else { throw CryptoError("d2i_ECDSA_SIG") }
        defer { ECDSA_SIG_free(signature) }
        var raw = [UInt8](repeating: 0, count: 64)
        guard let r = ECDSA_SIG_get0_r(signature), let s = ECDSA_SIG_get0_s(signature),
            BN_bn2binpad(r, &raw, 32) == 32,
            raw.withUnsafeMutableBufferPointer({ BN_bn2binpad(s, $0.baseAddress! + 32, 32) }) == 32
        else { throw CryptoError("encoding the signature") }
        return raw
    }

    /// Whether `signature` (r ‖ s, 64 bytes) is this key's ES256 signature of `message`.
    public func verify(_ signature: [UInt8], of message: [UInt8]) -> Bool {
        guard signature.count == 64, let ecdsa = ECDSA_SIG_new() else { return false }
        defer { ECDSA_SIG_free(ecdsa) }
        let r = BN_bin2bn(signature, 32, nil)
        let s = signature.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress! + 32, 32, nil) }
        guard let r, let s, ECDSA_SIG_set0(ecdsa, r, s) == 1 else {
            BN_free(r)
            BN_free(s)
            return false
        }
        var derPointer: UnsafeMutablePointer<UInt8>?
        let derLength = i2d_ECDSA_SIG(ecdsa, &derPointer)
        guard derLength > 0, let derPointer else { return false }
        defer { CFanoutOpenSSL_OPENSSL_free(derPointer) }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        let verified = message.withUnsafeBytes { message in
            EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, self.key) == 1
                && EVP_DigestVerify(context, derPointer, Int(derLength), message.baseAddress?.assumingMemoryBound(to: UInt8.self), message.count) == 1
        }
        ERR_clear_error()
        return verified
    }
}
