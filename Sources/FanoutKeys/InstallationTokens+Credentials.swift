public import FanoutCore
public import FanoutWire

/// Issuing installation credentials through the engine: what the TCP listener's REGISTER,
/// ISSUE_CREDENTIALS and GENERATE_AUTH_TOKEN and the HTTP front's Firebase Installations calls share.
extension InstallationTokens {
    /// New credentials for `installation`: a refresh token, whose SHA-256 is recorded through
    /// `changes` (replacing the earlier credentials, which stop working), and a first auth token.
    public func issueCredentials(
        for installation: Installation,
        in project: ProjectID,
        changes: inout Engine.Changes,
        now: Int64
    ) throws(FanoutError) -> InstallationCredentials {
        let made = RefreshToken.make(project: project.value, fid: installation.fid.description, secret: try Self.refreshSecret())
        // Signed before the digest is recorded: a signing failure changes nothing.
        let authToken = try self.authToken(for: installation, in: project, credentialDigest: made.refresh.digest, now: now)
        _ = try changes.setCredential(made.refresh.digest, of: .fid(installation.fid), in: project)
        return InstallationCredentials(fid: installation.fid.description, refreshToken: made.token, authToken: authToken)
    }

    /// The installation `fid` of `engine` and the digest of its refresh token; with `presented`,
    /// the refresh token a device proved itself with, which must still be that one.
    /// - Throws: `NOT_FOUND` (field `fid`) when the installation has no credentials (or is gone),
    ///   `UNAUTHENTICATED` when `presented` was replaced.
    public static func credential(
        of fid: FID,
        in project: ProjectID,
        engine: Engine,
        presented: RefreshToken?
    ) throws(FanoutError) -> (installation: Installation, digest: [UInt8]) {
        guard let (installation, digest) = engine.credential(of: fid, in: project) else {
            throw FanoutError(.notFound, "the installation has no credentials", field: "fid")
        }
        if let presented, !SHA256.constantTimeEqual(presented.digest, digest) {
            throw FanoutError(.unauthenticated, "the refresh token was replaced")
        }
        return (installation, digest)
    }

    /// Registers an installation and issues its credentials (REGISTER with the credentials
    /// option; Firebase Installations' create): the registration and the refresh token's digest
    /// go to the log in one append, so a crash keeps both or neither. With `creatingOnly` (an
    /// app's key, which must be taken as public), a registration that would answer an existing
    /// installation is `ALREADY_EXISTS` and changes nothing: no one takes over an installation
    /// whose details they learn.
    public func register(
        _ request: RegistrationRequest,
        in project: ProjectID,
        creatingOnly: Bool,
        changes: inout Engine.Changes,
        now: Int64
    ) throws(FanoutError) -> (result: RegistrationResult, credentials: InstallationCredentials) {
        let secret = try Self.refreshSecret()
        var made: (token: String, refresh: RefreshToken)?
        let result = try changes.register(request, in: project, creatingOnly: creatingOnly) { fid in
            let refresh = RefreshToken.make(project: project.value, fid: fid.description, secret: secret)
            made = refresh
            return refresh.refresh.digest
        }
        guard let made else { throw FanoutError(.internal, "the credentials could not be made") }
        // The refresh token is recorded; should signing fail, GENERATE_AUTH_TOKEN with it gets an auth token later.
        let authToken = try self.authToken(for: result.installation, in: project, credentialDigest: made.refresh.digest, now: now)
        return (result, InstallationCredentials(fid: result.installation.fid.description, refreshToken: made.token, authToken: authToken))
    }

    /// A new auth token for the installation `fid` of `engine`. With `presented`, the refresh
    /// token a device proved itself with, which must still be the installation's.
    /// - Throws: `NOT_FOUND` (field `fid`) when the installation has no credentials,
    ///   `UNAUTHENTICATED` when `presented` was replaced.
    public func generateAuthToken(
        for fid: FID,
        in project: ProjectID,
        engine: Engine,
        presented: RefreshToken?,
        now: Int64
    ) throws(FanoutError) -> AuthToken {
        let (installation, digest) = try Self.credential(of: fid, in: project, engine: engine, presented: presented)
        return try self.authToken(for: installation, in: project, credentialDigest: digest, now: now)
    }

    /// An auth token for `installation` under the credentials whose refresh token hashes to `digest`.
    private func authToken(for installation: Installation, in project: ProjectID, credentialDigest digest: [UInt8], now: Int64) throws(FanoutError) -> AuthToken {
        do {
            let auth = try self.issue(
                project: project.value, appID: installation.appID.value, fid: installation.fid.description,
                credentialID: RefreshToken.credentialID(of: digest), now: now
            )
            return AuthToken(token: auth.token, expiresAt: Timestamp(secondsSinceEpoch: auth.claims.expiresAt))
        } catch {
            throw FanoutError(.internal, "the auth token could not be signed")
        }
    }

    /// A refresh token's random bytes (system CSPRNG).
    private static func refreshSecret() throws(FanoutError) -> [UInt8] {
        do {
            return try RefreshToken.secret()
        } catch {
            throw FanoutError(.internal, "the credentials could not be made")
        }
    }
}
