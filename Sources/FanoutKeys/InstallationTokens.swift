internal import FanoutCore

/// Who an installation auth token speaks for: its claims (docs/security.md).
public struct InstallationClaims: Hashable, Sendable {
    public var project: String
    public var appID: String
    public var fid: String
    /// Which credentials issued it (from the refresh token's digest): tokens of credentials that
    /// were replaced or deleted stop being accepted.
    public var credentialID: String
    /// UNIX seconds.
    public var issuedAt: Int64
    public var expiresAt: Int64

    public init(project: String, appID: String, fid: String, credentialID: String, issuedAt: Int64, expiresAt: Int64) {
        self.project = project
        self.appID = appID
        self.fid = fid
        self.credentialID = credentialID
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
    }
}

/// Why a credential was refused; never contains the credential.
public struct CredentialError: Error, Equatable, CustomStringConvertible {
    public var description: String

    public init(_ description: String) {
        self.description = description
    }
}

/// Issues and verifies installation auth tokens: ES256 JWTs (RFC 7519, RFC 7518) signed with
/// `SigningKeys`, header `{"alg":"ES256","typ":"JWT","kid":...}`, claims `iss` (`fanoutd`),
/// `projectId`, `appId`, `fid`, `cid`, `iat` and `exp`.
public struct InstallationTokens: Sendable {
    /// Longest token accepted, in bytes.
    public static let maximumLength = 4096
    /// How far a token's `iat` may be ahead of the server's clock, in seconds.
    public static let clockSkew: Int64 = 60

    public let keys: SigningKeys
    /// Seconds a token is valid for (default 7 days, as Firebase Installations).
    public let lifetime: Int64
    /// The public keys of the other servers whose tokens this one accepts (a cluster's nodes), by
    /// `kid`; consulted for a `kid` that is not one of `keys`.
    public let otherKeys: @Sendable (String) -> ES256Key?

    public init(keys: SigningKeys, lifetime: Int64 = 7 * 86_400, otherKeys: @escaping @Sendable (String) -> ES256Key? = { _ in nil }) {
        self.keys = keys
        self.lifetime = lifetime
        self.otherKeys = otherKeys
    }

    /// A token for an installation, valid from `now` for `lifetime` seconds.
    public func issue(project: String, appID: String, fid: String, credentialID: String, now: Int64) throws -> (token: String, claims: InstallationClaims) {
        let claims = InstallationClaims(project: project, appID: appID, fid: fid, credentialID: credentialID, issuedAt: now, expiresAt: now + self.lifetime)
        let signer = self.keys.current
        let header = JSONObject([
            .init(key: "alg", value: .string("ES256")),
            .init(key: "typ", value: .string("JWT")),
            .init(key: "kid", value: .string(signer.id)),
        ])
        let payload = JSONObject([
            .init(key: "iss", value: .string("fanoutd")),
            .init(key: "projectId", value: .string(claims.project)),
            .init(key: "appId", value: .string(claims.appID)),
            .init(key: "fid", value: .string(claims.fid)),
            .init(key: "cid", value: .string(claims.credentialID)),
            .init(key: "iat", value: .number(JSONNumber(Int(claims.issuedAt)))),
            .init(key: "exp", value: .number(JSONNumber(Int(claims.expiresAt)))),
        ])
        let signingInput = Base64URL.encode(JSONWriter.encode(.object(header))) + "." + Base64URL.encode(JSONWriter.encode(.object(payload)))
        let signature = try signer.key.sign(Array(signingInput.utf8))
        return (signingInput + "." + Base64URL.encode(signature), claims)
    }

    /// The claims of a token this server signed, still valid at `now` (UNIX seconds).
    /// - Throws: `CredentialError` saying what is wrong (malformed, `alg` other than ES256, an
    ///   unknown `kid`, a bad signature, expired), never echoing the token.
    public func verify(_ token: [UInt8], now: Int64) throws(CredentialError) -> InstallationClaims {
        guard token.count <= Self.maximumLength else { throw CredentialError("the auth token is longer than \(Self.maximumLength) bytes") }
        let parts = token.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URL.decode(String(decoding: parts[0], as: UTF8.self)),
            let payloadBytes = Base64URL.decode(String(decoding: parts[1], as: UTF8.self)),
            let signature = Base64URL.decode(String(decoding: parts[2], as: UTF8.self))
        else { throw CredentialError("the auth token is not a JWT (three base64url parts)") }
        guard case .object(let header)? = try? JSONParser.parse(headerBytes) else { throw CredentialError("the auth token's header is not a JSON object") }
        guard header.string("alg") == "ES256" else { throw CredentialError("the auth token's alg is not ES256") }
        guard header.string("typ") == nil || header.string("typ") == "JWT" else { throw CredentialError("the auth token's typ is not JWT") }
        guard let kid = header.string("kid"), let key = self.keys.key(id: kid) ?? self.otherKeys(kid) else {
            throw CredentialError("the auth token's kid names no signing key of this server")
        }
        let signingInput = Array(token[..<(parts[0].count + 1 + parts[1].count)])
        guard key.verify(signature, of: signingInput) else { throw CredentialError("the auth token's signature is not valid") }
        guard case .object(let payload)? = try? JSONParser.parse(payloadBytes),
            let project = payload.string("projectId"), let appID = payload.string("appId"), let fid = payload.string("fid"),
            let credentialID = payload.string("cid"), let issuedAt = payload.integer("iat"), let expiresAt = payload.integer("exp")
        else { throw CredentialError("the auth token's claims are incomplete") }
        guard now < expiresAt else { throw CredentialError("the auth token has expired") }
        guard issuedAt <= now + Self.clockSkew else { throw CredentialError("the auth token was issued in the future") }
        return InstallationClaims(project: project, appID: appID, fid: fid, credentialID: credentialID, issuedAt: issuedAt, expiresAt: expiresAt)
    }
}

/// An installation's refresh token: `rt1.PROJECT.FID.SECRET`, the secret 32 random bytes in
/// base64url. The registry keeps only its SHA-256 (`digest`).
public struct RefreshToken: Hashable, Sendable {
    public let project: String
    public let fid: String
    /// SHA-256 of the whole token.
    public let digest: [UInt8]

    /// The credential id auth tokens carry: the first 12 bytes of the digest, base64url.
    public var credentialID: String { Self.credentialID(of: self.digest) }

    public static func credentialID(of digest: [UInt8]) -> String { Base64URL.encode(digest.prefix(12)) }

    /// A new refresh token for an installation.
    public static func generate(project: String, fid: String) throws -> (token: String, refresh: RefreshToken) {
        Self.make(project: project, fid: fid, secret: try Self.secret())
    }

    /// A refresh token's 32 random bytes, before its installation's FID is known.
    static func secret() throws -> [UInt8] {
        try SecureRandom.bytes(32)
    }

    /// The refresh token of `secret` for an installation (cannot fail).
    static func make(project: String, fid: String, secret: [UInt8]) -> (token: String, refresh: RefreshToken) {
        let token = "rt1.\(project).\(fid).\(Base64URL.encode(secret))"
        return (token, RefreshToken(project: project, fid: fid, digest: SHA256.hash(token.utf8)))
    }

    /// Reads a presented token's parts; the caller compares `digest` with the stored one.
    public init(parsing token: [UInt8]) throws(CredentialError) {
        guard token.count <= 512 else { throw CredentialError("the refresh token is too long") }
        let parts = token.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0].elementsEqual("rt1".utf8),
            let project = ProjectID(String(decoding: parts[1], as: UTF8.self)),
            let fid = FID(String(decoding: parts[2], as: UTF8.self), allowingLegacy: true),
            let secret = Base64URL.decode(String(decoding: parts[3], as: UTF8.self)), secret.count == 32
        else { throw CredentialError("the refresh token is malformed") }
        self.init(project: project.value, fid: fid.description, digest: SHA256.hash(token))
    }

    private init(project: String, fid: String, digest: [UInt8]) {
        self.project = project
        self.fid = fid
        self.digest = digest
    }
}

extension JSONObject {
    // The parser refuses repeated keys, so `self[key]` is the only member of that name.
    fileprivate func string(_ key: String) -> String? {
        if case .string(let value)? = self[key] { return value }
        return nil
    }

    fileprivate func integer(_ key: String) -> Int64? {
        if case .number(let number)? = self[key] { return number.int64 }
        return nil
    }
}
