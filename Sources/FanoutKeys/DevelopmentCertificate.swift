internal import FanoutCore
internal import CFanoutOpenSSL

/// A self-signed certificate and its P-256 key, for trying TLS out (`fanout tls dev-cert`), made
/// with system libcrypto. It names `localhost`, `127.0.0.1` and `::1`, may serve and authenticate
/// clients, and is its own CA: give the same file to the client as its trust root (and to fanoutd
/// as `--tls-client-ca` to try mTLS with it). Not for production.
public struct DevelopmentCertificate: Sendable {
    /// The certificate, PEM.
    public let certificatePEM: String
    /// The private key, PKCS #8 PEM.
    public let privateKeyPEM: String

    /// - Parameters:
    ///   - commonName: the subject's CN.
    ///   - validFrom: seconds from now the validity starts (negative: in the past).
    ///   - validFor: seconds of validity.
    public static func generate(commonName: String = "fanout development", validFrom: Int = -60, validFor: Int = 365 * 86_400) throws(CryptoError) -> DevelopmentCertificate {
        let key = try generateP256Key()
        defer { EVP_PKEY_free(key) }
        guard let certificate = X509_new() else { throw CryptoError("X509_new") }
        defer { X509_free(certificate) }
        let serial = (try? SecureRandom.bytes(8)) ?? [1]
        let serialNumber = serial.reduce(0) { $0 << 8 | Int($1) } & 0x7FFF_FFFF_FFFF_FFFF
        guard X509_set_version(certificate, 2) == 1,
            ASN1_INTEGER_set(X509_get_serialNumber(certificate), serialNumber) == 1,
            X509_gmtime_adj(X509_getm_notBefore(certificate), validFrom) != nil,
            X509_gmtime_adj(X509_getm_notAfter(certificate), validFrom + validFor) != nil,
            X509_set_pubkey(certificate, key) == 1,
            let name = X509_get_subject_name(certificate),
            X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, commonName, -1, -1, 0) == 1,
            X509_set_issuer_name(certificate, name) == 1
        else { throw CryptoError("building the certificate") }
        var context = X509V3_CTX()
        X509V3_set_ctx(&context, certificate, certificate, nil, nil, 0)
        let extensions = [
            (NID_basic_constraints, "critical,CA:TRUE"),
            (NID_key_usage, "critical,digitalSignature,keyCertSign"),
            (NID_ext_key_usage, "serverAuth,clientAuth"),
            (NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1,IP:::1"),
            (NID_subject_key_identifier, "hash"),
        ]
        for (nid, value) in extensions {
            guard let x509Extension = X509V3_EXT_conf_nid(nil, &context, nid, value) else { throw CryptoError("the certificate extension \(value)") }
            defer { X509_EXTENSION_free(x509Extension) }
            guard X509_add_ext(certificate, x509Extension, -1) == 1 else { throw CryptoError("X509_add_ext") }
        }
        guard X509_sign(certificate, key, EVP_sha256()) > 0 else { throw CryptoError("X509_sign") }
        guard let bio = BIO_new(BIO_s_mem()) else { throw CryptoError("BIO_new") }
        defer { BIO_free(bio) }
        guard PEM_write_bio_X509(bio, certificate) == 1 else { throw CryptoError("PEM_write_bio_X509") }
        return DevelopmentCertificate(certificatePEM: memoryBIOText(bio), privateKeyPEM: try pemOfPrivateKey(key))
    }
}
