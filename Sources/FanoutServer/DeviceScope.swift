internal import FanoutCore
internal import FanoutKeys
internal import FanoutWire

/// What a device connection may name: its own installation, and the user that installation is
/// bound to (docs/security.md). Checked against the engine before the request is performed.
enum DeviceScope {
    /// What a device connection is told when `isLive` says its credential no longer holds.
    static let revoked = FanoutError(.unauthenticated, "the installation was deleted or its credentials were replaced")

    /// Whether the installation a device connection speaks for still lives with the credentials it
    /// presented: not deleted, its credentials not replaced. Always true for a key.
    static func isLive(_ principal: Principal, engine: Engine) -> Bool {
        guard let (project, fid) = principal.installation else { return true }
        guard let id = ProjectID(project), let fid = FID(fid, allowingLegacy: true), let (_, digest) = engine.credential(of: fid, in: id) else { return false }
        switch principal {
        case .device(let claims): return RefreshToken.credentialID(of: digest) == claims.credentialID
        case .refresh(let token): return SHA256.constantTimeEqual(token.digest, digest)
        case .key: return true
        }
    }

    /// Refuses, with PERMISSION_DENIED naming the field, a device's request that names another
    /// installation or another user. A key's requests pass.
    static func check(_ request: ClientRequest, of principal: Principal, engine: Engine) throws(FanoutError) {
        guard let (project, fid) = principal.installation else { return }
        guard let id = ProjectID(project), let own = FID(fid, allowingLegacy: true) else {
            throw FanoutError(.unauthenticated, "the credential names no installation")
        }
        func isOwn(_ registration: String) -> Bool {
            switch RegistrationAddress(parsing: registration) {
            case .fid(let fid)?: return fid == own
            case let address?: return (try? engine.installation(address, in: id))?.fid == own
            case nil: return false
            }
        }
        func isOwnUser(_ user: String) -> Bool {
            guard let bound = (try? engine.installation(.fid(own), in: id))?.user else { return false }
            return bound.value == user
        }
        func denied(_ field: String) -> FanoutError {
            FanoutError(.permissionDenied, "a device may only name its own installation and its user", field: field)
        }
        switch request {
        case .refreshToken(_, let registration, _), .touch(_, let registration), .getInstallation(_, let registration),
            .setAPNsToken(_, let registration, _), .topicsOf(_, let registration), .pending(_, let registration):
            guard isOwn(registration) else { throw denied("registration") }
        case .deleteInstallation(_, let fid), .generateAuthToken(_, let fid):
            guard FID(fid, allowingLegacy: true) == own else { throw denied("fid") }
        case .subscribe(_, _, let registrations), .unsubscribe(_, _, let registrations):
            for (index, registration) in registrations.enumerated() where !isOwn(registration) {
                throw denied("registrations[\(index)]")
            }
        case .getUser(_, let user):
            guard isOwnUser(user) else { throw denied("user") }
        case .signOut(_, let user, let registration):
            guard isOwn(registration) else { throw denied("registration") }
            guard isOwnUser(user) else { throw denied("user") }
        case .attach(_, let scope, _, _):
            guard case .installations(let registrations) = scope, !registrations.isEmpty, registrations.allSatisfy(isOwn) else {
                throw denied("scope")
            }
        default:
            break  // PING, JWKS, GRANT, ACK and DETACH name no installation
        }
    }
}
