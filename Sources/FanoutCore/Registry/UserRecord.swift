/// The user directory's record: devices as slots.
struct UserRecord {
    var isAnonymous: Bool
    var devices: [UInt32]
    var lastActive: Int64
    /// When the user was first bound (milliseconds since the epoch): anonymous clean-up counts from here.
    var createdAt: Int64
}
