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
        let refresh: (token: String, refresh: RefreshToken)
        let auth: (token: String, claims: InstallationClaims)
        do {
            refresh = try RefreshToken.generate(project: project.value, fid: installation.fid.description)
            auth = try self.issue(
                project: project.value, appID: installation.appID.value, fid: installation.fid.description,
                credentialID: refresh.refresh.credentialID, now: now
            )
        } catch {
            throw FanoutError(.internal, "the credentials could not be made")
        }
        _ = try changes.setCredential(refresh.refresh.digest, of: .fid(installation.fid), in: project)
        return InstallationCredentials(
            fid: installation.fid.description, refreshToken: refresh.token,
            authToken: AuthToken(token: auth.token, expiresAt: Timestamp(secondsSinceEpoch: auth.claims.expiresAt))
        )
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
        guard let (installation, digest) = engine.credential(of: fid, in: project) else {
            throw FanoutError(.notFound, "the installation has no credentials", field: "fid")
        }
        if let presented, !SHA256.constantTimeEqual(presented.digest, digest) {
            throw FanoutError(.unauthenticated, "the refresh token was replaced")
        }
        do {
            let auth = try self.issue(
                project: project.value, appID: installation.appID.value, fid: fid.description,
                credentialID: RefreshToken.credentialID(of: digest), now: now
            )
            return AuthToken(token: auth.token, expiresAt: Timestamp(secondsSinceEpoch: auth.claims.expiresAt))
        } catch {
            throw FanoutError(.internal, "the auth token could not be signed")
        }
    }
}
