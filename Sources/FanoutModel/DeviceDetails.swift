/// What the device store keeps about a device (the device-store model: one user, many devices).
/// Each field is free text of at most 256 UTF-8 bytes with no control characters.
public struct DeviceDetails: Hashable, Sendable {
    public static let maximumFieldLength = 256

    // `Optional<String>`, not `String?`: see `RegistrationRequest`.
    /// A name the user recognises ("Ana's iPhone").
    public var name: Optional<String>
    /// The operating system and version ("iOS 19.1").
    public var os: Optional<String>
    /// The kind of device ("phone", "tablet", "browser").
    public var type: Optional<String>

    public init() {
        self.name = nil
        self.os = nil
        self.type = nil
    }

    /// Validates every field.
    /// - Throws: `INVALID_ARGUMENT` naming the first bad field (`deviceName`, `deviceOs`, `deviceType`, as on the wire).
    public init(name: String? = nil, os: String? = nil, type: String? = nil) throws(FanoutError) {
        for (field, value) in [("deviceName", name), ("deviceOs", os), ("deviceType", type)] {
            if let value, !ASCII.isPrintableText(value, maxBytes: Self.maximumFieldLength) {
                throw .invalidArgument(
                    "must be at most \(Self.maximumFieldLength) bytes with no control characters",
                    field: field
                )
            }
        }
        self.name = name
        self.os = os
        self.type = type
    }
}
