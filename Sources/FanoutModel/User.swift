/// A user and their devices, as the engine reports them.
public struct User: Hashable, Sendable {
    public var id: UserID
    /// Anonymous users can be linked to a permanent user, and are cleaned up when left alone.
    public var isAnonymous: Bool
    public var devices: [Installation]
    /// The last bind, link or device activity.
    public var lastActive: Timestamp
    /// When the user was first bound: anonymous clean-up counts from here.
    public var createdAt: Timestamp

    /// `createdAt` defaults to `lastActive`.
    public init(id: UserID, isAnonymous: Bool, devices: [Installation], lastActive: Timestamp, createdAt: Timestamp? = nil) {
        self.id = id
        self.isAnonymous = isAnonymous
        self.devices = devices
        self.lastActive = lastActive
        self.createdAt = createdAt ?? lastActive
    }
}
