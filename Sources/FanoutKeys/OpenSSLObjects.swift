internal import CFanoutOpenSSL

/// What a libcrypto call failed at, with OpenSSL's own reason when it has one.
public struct CryptoError: Error, CustomStringConvertible {
    public var description: String

    init(_ what: String) {
        let code = ERR_get_error()
        ERR_clear_error()
        if code == 0 {
            self.description = what
        } else {
            var text = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &text, text.count)
            self.description = "\(what): \(String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))"
        }
    }
}

/// The text a memory BIO holds.
func memoryBIOText(_ bio: OpaquePointer) -> String {
    var pointer: UnsafeMutablePointer<CChar>?
    let length = CFanoutOpenSSL_BIO_get_mem_data(bio, &pointer)
    guard let pointer, length > 0 else { return "" }
    return String(decoding: UnsafeRawBufferPointer(start: pointer, count: Int(length)), as: UTF8.self)
}

/// A P-256 key pair made by libcrypto (`EVP_PKEY_generate`).
func generateP256Key() throws(CryptoError) -> OpaquePointer {
    guard let context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { throw CryptoError("EVP_PKEY_CTX_new_from_name") }
    defer { EVP_PKEY_CTX_free(context) }
    var key: OpaquePointer?
    guard EVP_PKEY_keygen_init(context) == 1, EVP_PKEY_CTX_set_group_name(context, "P-256") == 1,
        EVP_PKEY_generate(context, &key) == 1, let key
    else { throw CryptoError("generating a P-256 key") }
    return key
}

/// The PKCS #8 PEM of a private key.
func pemOfPrivateKey(_ key: OpaquePointer) throws(CryptoError) -> String {
    guard let bio = BIO_new(BIO_s_mem()) else { throw CryptoError("BIO_new") }
    defer { BIO_free(bio) }
    guard PEM_write_bio_PrivateKey(bio, key, nil, nil, 0, nil, nil) == 1 else { throw CryptoError("PEM_write_bio_PrivateKey") }
    return memoryBIOText(bio)
}

/// The key of a PEM text (a private key, or with `public` a SubjectPublicKeyInfo).
func readKeyPEM(_ text: String, isPublic: Bool) throws(CryptoError) -> OpaquePointer {
    let bytes = Array(text.utf8)
    let key: OpaquePointer? = bytes.withUnsafeBytes { buffer in
        guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return nil }
        defer { BIO_free(bio) }
        return isPublic ? PEM_read_bio_PUBKEY(bio, nil, nil, nil) : PEM_read_bio_PrivateKey(bio, nil, nil, nil)
    }
    guard let key else { throw CryptoError(isPublic ? "not a PEM public key" : "not a PEM private key") }
    return key
}

/// The PEM SubjectPublicKeyInfo of a key.
func pemOfPublicKey(_ key: OpaquePointer) throws(CryptoError) -> String {
    guard let bio = BIO_new(BIO_s_mem()) else { throw CryptoError("BIO_new") }
    defer { BIO_free(bio) }
    guard PEM_write_bio_PUBKEY(bio, key) == 1 else { throw CryptoError("PEM_write_bio_PUBKEY") }
    return memoryBIOText(bio)
}
