internal import CFanoutOpenSSL

/// Random bytes from the system CSPRNG (OpenSSL `RAND_bytes`): FIDs, API keys, refresh tokens.
public enum SecureRandom {
    /// - Throws: `INTERNAL` when the CSPRNG fails (it does not on a healthy system).
    public static func bytes(_ count: Int) throws(FanoutError) -> [UInt8] {
        var random = [UInt8](repeating: 0, count: count)
        let status = random.withUnsafeMutableBytes { buffer in
            RAND_bytes(buffer.baseAddress, Int32(buffer.count))
        }
        guard status == 1 else {
            throw FanoutError(.internal, "the system CSPRNG (RAND_bytes) failed")
        }
        return random
    }
}
