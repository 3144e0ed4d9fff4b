/// An app installation as the registry knows it: a read-only snapshot returned by the engine.
public struct Installation: Hashable, Sendable {
    // `Optional<T>`, not `T?`: see `RegistrationRequest`.
    /// The dense slot the engine keeps it in. Reused after deletion; `generation` tells holders apart.
    public var slot: UInt32
    /// Incremented each time `slot` is given to a new installation.
    public var generation: UInt32
    public var fid: FID
    /// The current registration token, if the app registered one (token mode).
    public var token: Optional<RegistrationToken>
    public var platform: Platform
    public var appID: AppID
    public var device: DeviceDetails
    /// The APNs device token, for iOS installations that supplied one.
    public var apnsToken: Optional<APNsDeviceToken>
    /// The user the installation is bound to, if any.
    public var user: Optional<UserID>
    public var createdAt: Timestamp
    /// The last time the installation registered, refreshed its token or was touched.
    public var lastSeen: Timestamp

    public init(
        slot: UInt32,
        generation: UInt32,
        fid: FID,
        token: RegistrationToken?,
        platform: Platform,
        appID: AppID,
        device: DeviceDetails,
        apnsToken: APNsDeviceToken?,
        user: UserID?,
        createdAt: Timestamp,
        lastSeen: Timestamp
    ) {
        self.slot = slot
        self.generation = generation
        self.fid = fid
        self.token = token
        self.platform = platform
        self.appID = appID
        self.device = device
        self.apnsToken = apnsToken
        self.user = user
        self.createdAt = createdAt
        self.lastSeen = lastSeen
    }
}

/// What an app sends to register an installation.
public struct RegistrationRequest: Sendable {
    // Optional stored properties are spelled `Optional<T>`, not `T?`: `T?` gives each an implicit
    // `= nil`, so an initializer's stores are assignments, and Swift 6.3 then copies the whole
    // value out of the initializer (every reference retained, then released).
    /// The FID the client generated. The engine assigns a new one when this is `nil`, not a valid
    /// FID, already in use, or the FID of a deleted installation (as FIS does).
    public var offeredFID: String? {
        get { self.offered?.text }
        set { self.offered = newValue.map { .text($0) } }
    }
    /// The offered FID as its decoder held it (parsed already when it is a FID).
    package var offered: Optional<OfferedFID>
    public var token: Optional<RegistrationToken>
    public var platform: Platform
    public var appID: AppID
    public var device: DeviceDetails
    /// iOS only.
    public var apnsToken: Optional<APNsDeviceToken>

    public init(
        offeredFID: String? = nil,
        token: RegistrationToken? = nil,
        platform: Platform,
        appID: AppID,
        device: DeviceDetails = DeviceDetails(),
        apnsToken: APNsDeviceToken? = nil
    ) {
        self.offered = offeredFID.map { .text($0) }
        self.token = token
        self.platform = platform
        self.appID = appID
        self.device = device
        self.apnsToken = apnsToken
    }

    /// A request with its offered FID as a decoder holds it.
    package init(offered: OfferedFID?, token: RegistrationToken?, platform: Platform, appID: AppID, device: DeviceDetails, apnsToken: APNsDeviceToken?) {
        self.offered = offered
        self.token = token
        self.platform = platform
        self.appID = appID
        self.device = device
        self.apnsToken = apnsToken
    }
}

/// The outcome of a registration.
public struct RegistrationResult: Hashable, Sendable {
    public var installation: Installation
    /// True when the engine did not use the offered FID (none, invalid, taken or retired).
    public var fidWasAssigned: Bool
    /// True when the request repeated a registration that already exists (the same token, or the
    /// same offered FID without a token, with the same platform, app, device details and APNs
    /// token): `installation` is that one and nothing changed. A retry after a lost reply gets this.
    public var isExisting: Bool

    public init(installation: Installation, fidWasAssigned: Bool, isExisting: Bool = false) {
        self.installation = installation
        self.fidWasAssigned = fidWasAssigned
        self.isExisting = isExisting
    }
}

/// What registering one item of a batch did, without the installation (which the caller sent,
/// but for its FID): REGISTER_BATCH_FIDS's reply item.
public enum RegistrationReceipt: Hashable, Sendable {
    /// `fidWasAssigned`: the server did not keep the offered FID (none, invalid, taken or
    /// retired); `isExisting`: the registration was there already, and nothing changed.
    case registered(fid: FID, fidWasAssigned: Bool, isExisting: Bool)
    /// The item was refused (the others were not): what REGISTER would have answered.
    case failed(FanoutError)

    /// The receipt of a registration's result.
    public init(_ result: RegistrationResult) {
        self = .registered(fid: result.installation.fid, fidWasAssigned: result.fidWasAssigned, isExisting: result.isExisting)
    }
}
