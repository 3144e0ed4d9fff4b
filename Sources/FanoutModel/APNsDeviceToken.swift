/// An APNs device token for an iOS installation: hexadecimal, an even number of 16...200 digits
/// (APNs tokens are 32 bytes today and documented as variable length). Stored lowercase.
///
/// Its `description` is redacted; read `hex` for the value.
public struct APNsDeviceToken: Hashable, Sendable, CustomStringConvertible {
    public let hex: String

    public init?(_ hex: String) {
        var hex = hex
        guard let token = hex.withUTF8({ Self(utf8: UnsafeRawBufferPointer($0)) }) else { return nil }
        self = token
    }

    /// Validates UTF-8 bytes (from a frame) as a token, lowercased as they are copied: one
    /// `String` made, none before they pass.
    public init?(utf8 bytes: UnsafeRawBufferPointer) {
        guard bytes.count >= 16, bytes.count <= 200, bytes.count % 2 == 0, bytes.allSatisfy(ASCII.isHexDigit) else {
            return nil
        }
        self.hex = String(unsafeUninitializedCapacity: bytes.count) { output in
            for (index, byte) in bytes.enumerated() { output[index] = ASCII.lowercased(byte) }
            return bytes.count
        }
    }

    public var description: String { "<apns token: \(self.hex.utf8.count / 2) bytes>" }
}
