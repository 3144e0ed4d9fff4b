internal import CFanoutOpenSSL

extension FID {
    /// A new random FID, made exactly as the Firebase Installations SDKs do: 17 bytes from a
    /// CSPRNG (OpenSSL `RAND_bytes`), the first four bits forced to `0111`, URL-safe base64, the
    /// first 22 characters.
    ///
    /// - Throws: `FanoutError` with code `internal` if the CSPRNG fails (it does not on a healthy system).
    public static func generate() throws(FanoutError) -> FID {
        var bytes = [UInt8](repeating: 0, count: 17)
        let status = bytes.withUnsafeMutableBufferPointer { buffer in
            RAND_bytes(buffer.baseAddress, Int32(buffer.count))
        }
        guard status == 1 else {
            throw FanoutError(.internal, "the system CSPRNG (RAND_bytes) failed")
        }
        return Self.make(fromRandomBytes: bytes)
    }
}
