/// The user directory's record: devices as slots.
struct UserRecord {
    var isAnonymous: Bool
    var devices: [UInt32]
    var lastActive: Int64
}
