public import FanoutCore
public import FanoutKeys
public import FanoutWire

/// What the HTTP front's Firebase Installations calls and its JWK Set ask of what issues
/// installation credentials: one engine with its signing keys (`EngineInstallationCredentials`),
/// or a cluster node, which has each installation's shard owner issue them (docs/scale-out.md).
public protocol InstallationCredentialsBackend: Sendable {
    /// Registers an installation and issues its credentials, answered once durable. With
    /// `creatingOnly` (an app's key), one that exists is `ALREADY_EXISTS`. `now` (UNIX seconds,
    /// from `now()`) is when the auth token is issued, where the issuer keeps no clock of its own.
    func createInstallation(_ request: RegistrationRequest, in project: ProjectID, creatingOnly: Bool, now: Int64) async throws(FanoutError) -> (result: RegistrationResult, credentials: InstallationCredentials)

    /// A new auth token for the installation `fid`, whose refresh token `presented` must be.
    func generateAuthToken(for fid: FID, in project: ProjectID, presented: RefreshToken, now: Int64) async throws(FanoutError) -> AuthToken

    /// Deletes the installation `fid`, whose refresh token `presented` must be.
    func deleteInstallation(_ fid: FID, in project: ProjectID, presented: RefreshToken) async throws(FanoutError)

    /// The public keys auth tokens are signed with, as a JWK Set.
    func jwks() async throws(FanoutError) -> String

    /// Now, in UNIX seconds, as the tokens' expiry is counted.
    func now() -> Int64
}

/// One engine's installation credentials, signed with `tokens`' keys. `credentialsChanged(project)`
/// runs after a call deleted an installation or replaced its credentials, so that open device
/// connections elsewhere (the TCP listener's) check theirs at once.
public struct EngineInstallationCredentials: InstallationCredentialsBackend {
    let engine: Engine
    let tokens: InstallationTokens
    let credentialsChanged: @Sendable (ProjectID) -> Void

    public init(engine: Engine, tokens: InstallationTokens, credentialsChanged: @escaping @Sendable (ProjectID) -> Void = { _ in }) {
        self.engine = engine
        self.tokens = tokens
        self.credentialsChanged = credentialsChanged
    }

    public func createInstallation(_ request: RegistrationRequest, in project: ProjectID, creatingOnly: Bool, now: Int64) async throws(FanoutError) -> (result: RegistrationResult, credentials: InstallationCredentials) {
        let tokens = self.tokens
        let created = try await self.engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in
            try tokens.register(request, in: project, creatingOnly: creatingOnly, changes: &changes, now: now)
        }.durable()
        if created.result.isExisting { self.credentialsChanged(project) }  // an admin replaced them
        return created
    }

    public func generateAuthToken(for fid: FID, in project: ProjectID, presented: RefreshToken, now: Int64) async throws(FanoutError) -> AuthToken {
        try self.tokens.generateAuthToken(for: fid, in: project, engine: self.engine, presented: presented, now: now)
    }

    public func deleteInstallation(_ fid: FID, in project: ProjectID, presented: RefreshToken) async throws(FanoutError) {
        _ = try InstallationTokens.credential(of: fid, in: project, engine: self.engine, presented: presented)
        _ = try await self.engine.deleteInstallation(fid, in: project)
        self.credentialsChanged(project)
    }

    public func jwks() async throws(FanoutError) -> String {
        do {
            return try self.tokens.keys.jwks()
        } catch {
            throw FanoutError(.internal, "the JWK Set could not be written")
        }
    }

    public func now() -> Int64 { self.engine.clock.now().secondsSinceEpoch }
}
