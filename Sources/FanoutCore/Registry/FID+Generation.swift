extension FID {
    /// A new random FID, made exactly as the Firebase Installations SDKs do: 17 bytes from a
    /// CSPRNG (OpenSSL `RAND_bytes`), the first four bits forced to `0111`, URL-safe base64, the
    /// first 22 characters.
    ///
    /// - Throws: `FanoutError` with code `internal` if the CSPRNG fails (it does not on a healthy system).
    public static func generate() throws(FanoutError) -> FID {
        Self.make(fromRandomBytes: try SecureRandom.bytes(17))
    }
}
