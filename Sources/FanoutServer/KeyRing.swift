internal import FanoutKeys
internal import FanoutModel

/// The API keys a server accepts now, replaced whole by `FanoutServer.reloadKeys` (SIGHUP in
/// fanoutd). A connection authenticates against the keys of the moment it connects; on a reload
/// each open connection checks its key against the new ones and ends if it was revoked.
final class KeyRing: Sendable {
    /// The user event a reload sends through every open connection.
    struct Reloaded: Sendable {
        let keys: APIKeyStore
    }

    private let keys: Locked<APIKeyStore>

    init(_ keys: APIKeyStore) {
        self.keys = Locked(keys)
    }

    var current: APIKeyStore { self.keys.withLock { $0 } }

    func replace(with keys: APIKeyStore) {
        self.keys.withLock { $0 = keys }
    }
}
