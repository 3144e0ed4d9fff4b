import FanoutCore
import FanoutKeys
import FanoutTestSupport
import Foundation
import Testing

/// Installation auth tokens (ES256 JWTs) and refresh tokens: round trip, rotation, every forgery
/// the security issue names, a check by an implementation that is not ours (the openssl command),
/// and a fuzz of the parser.
@Suite("Installation tokens")
struct InstallationTokenTests {
    static let now: Int64 = 1_790_000_000

    static func withTokens<T>(lifetime: Int64 = 3600, _ body: (InstallationTokens, String) throws -> T) throws -> T {
        try TemporaryDirectory.with { directory in
            let keys = try SigningKeys.open(directory: directory + "/signing-keys", now: Self.now)
            return try body(InstallationTokens(keys: keys, lifetime: lifetime), directory)
        }
    }

    static func issue(_ tokens: InstallationTokens, now: Int64 = Self.now) throws -> String {
        try tokens.issue(project: "shop-app", appID: "1:1:ios:a", fid: "eWkQ0JhLD2hnwthI-tkvWz", credentialID: "cid-1", now: now).token
    }

    static func parts(_ token: String) -> [String] { token.split(separator: ".", omittingEmptySubsequences: false).map(String.init) }

    static func json(_ part: String) throws -> [String: Any] {
        let bytes = try #require(Base64URL.decode(part))
        return try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
    }

    /// The token with its header or payload replaced by `json` (the signature kept).
    static func replacing(_ token: String, part: Int, with json: String) -> String {
        var parts = Self.parts(token)
        parts[part] = Base64URL.encode(Array(json.utf8))
        return parts.joined(separator: ".")
    }

    @Test func aTokenRoundTripsWithItsClaims() throws {
        try Self.withTokens { tokens, _ in
            let token = try Self.issue(tokens)
            let header = try Self.json(Self.parts(token)[0])
            #expect(header["alg"] as? String == "ES256" && header["typ"] as? String == "JWT")
            #expect(header["kid"] as? String == tokens.keys.current.id)
            let payload = try Self.json(Self.parts(token)[1])
            #expect(payload["fid"] as? String == "eWkQ0JhLD2hnwthI-tkvWz" && payload["appId"] as? String == "1:1:ios:a")
            #expect(payload["projectId"] as? String == "shop-app" && payload["exp"] as? Int == Int(Self.now) + 3600)
            let claims = try tokens.verify(Array(token.utf8), now: Self.now + 10)
            #expect(claims == InstallationClaims(project: "shop-app", appID: "1:1:ios:a", fid: "eWkQ0JhLD2hnwthI-tkvWz", credentialID: "cid-1", issuedAt: Self.now, expiresAt: Self.now + 3600))
            #expect(throws: CredentialError("the auth token has expired")) { try tokens.verify(Array(token.utf8), now: Self.now + 3600) }
        }
    }

    @Test func everyForgeryIsRefused() throws {
        try Self.withTokens { tokens, directory in
            let token = try Self.issue(tokens)
            let parts = Self.parts(token)
            let kid = tokens.keys.current.id
            // A key that is not the server's signs the same header and claims.
            let other = try SigningKeys.open(directory: directory + "/other", now: Self.now)
            let stranger = try InstallationTokens(keys: other).issue(project: "shop-app", appID: "1:1:ios:a", fid: "eWkQ0JhLD2hnwthI-tkvWz", credentialID: "cid-1", now: Self.now).token
            let strangerWithOurKid = Self.replacing(stranger, part: 0, with: #"{"alg":"ES256","typ":"JWT","kid":"\#(kid)"}"#)
            let forgeries: [(String, String)] = [
                ("alg none", Self.replacing(token, part: 0, with: #"{"alg":"none","typ":"JWT","kid":"\#(kid)"}"#)),
                ("alg none, no signature", Self.replacing(token, part: 0, with: #"{"alg":"none"}"#).split(separator: ".").prefix(2).joined(separator: ".") + "."),
                ("alg HS256", Self.replacing(token, part: 0, with: #"{"alg":"HS256","typ":"JWT","kid":"\#(kid)"}"#)),
                ("an unknown kid", Self.replacing(token, part: 0, with: #"{"alg":"ES256","typ":"JWT","kid":"nope"}"#)),
                ("no kid", Self.replacing(token, part: 0, with: #"{"alg":"ES256","typ":"JWT"}"#)),
                ("another key under our kid", strangerWithOurKid),
                ("another key under its own kid", stranger),
                ("altered claims", Self.replacing(token, part: 1, with: #"{"iss":"fanoutd","projectId":"shop-app","appId":"1:1:ios:a","fid":"cccccccccccccccccccccc","cid":"cid-1","iat":\#(Self.now),"exp":\#(Self.now + 3600)}"#)),
                ("a longer life", Self.replacing(token, part: 1, with: String(decoding: Base64URL.decode(parts[1])!, as: UTF8.self).replacingOccurrences(of: "\(Self.now + 3600)", with: "\(Self.now + 999_999)"))),
                ("a flipped signature bit", parts[0] + "." + parts[1] + "." + Base64URL.encode(Base64URL.decode(parts[2])!.enumerated().map { $0.offset == 5 ? $0.element ^ 1 : $0.element })),
                ("a short signature", parts[0] + "." + parts[1] + "." + Base64URL.encode(Base64URL.decode(parts[2])!.prefix(63))),
                ("no signature", parts[0] + "." + parts[1] + "."),
                ("two parts", parts[0] + "." + parts[1]),
                ("padding", token + "="),
                ("empty", ""),
            ]
            for (what, forged) in forgeries {
                #expect(throws: CredentialError.self, "\(what)") { try tokens.verify(Array(forged.utf8), now: Self.now + 1) }
                do {
                    _ = try tokens.verify(Array(forged.utf8), now: Self.now + 1)
                } catch {
                    #expect(!"\(error)".contains(parts[2]) && !"\(error)".contains(parts[1]), "the error never echoes the token")
                }
            }
            #expect(throws: CredentialError("the auth token was issued in the future")) { try tokens.verify(Array(try Self.issue(tokens, now: Self.now + 600).utf8), now: Self.now) }
        }
    }

    @Test func rotationKeepsOldTokensValidUntilTheirKeyIsPruned() throws {
        try Self.withTokens { tokens, directory in
            let old = try Self.issue(tokens)
            let first = tokens.keys.current.id
            let second = try tokens.keys.rotate(now: Self.now + 100)
            #expect(second != first && tokens.keys.current.id == second)
            let new = try Self.issue(tokens, now: Self.now + 100)
            #expect(try Self.json(Self.parts(new)[0])["kid"] as? String == second, "new tokens are signed with the new key")
            #expect(try tokens.verify(Array(old.utf8), now: Self.now + 200).fid == "eWkQ0JhLD2hnwthI-tkvWz", "old tokens stay valid")
            // The keys survive a restart from their directory.
            let reopened = InstallationTokens(keys: try SigningKeys.open(directory: directory + "/signing-keys", now: Self.now + 300), lifetime: 3600)
            #expect(reopened.keys.current.id == second && reopened.keys.all.count == 2)
            #expect(try reopened.verify(Array(old.utf8), now: Self.now + 300).credentialID == "cid-1")
            // Once every token the old key signed has expired, the key goes, and with it its tokens.
            #expect(try reopened.keys.prune(now: Self.now + 100 + 3599, tokenLifetime: 3600).isEmpty)
            #expect(try reopened.keys.prune(now: Self.now + 100 + 3600, tokenLifetime: 3600) == [first])
            #expect(throws: CredentialError("the auth token's kid names no signing key of this server")) { try reopened.verify(Array(old.utf8), now: Self.now + 300) }
            let files = try FileManager.default.contentsOfDirectory(atPath: directory + "/signing-keys").sorted()
            #expect(files == ["\(second).pem", "manifest"].sorted())
            let attributes = try FileManager.default.attributesOfItem(atPath: directory + "/signing-keys/\(second).pem")
            #expect((attributes[.posixPermissions] as? Int) == 0o600)
        }
    }

    /// The JWK Set verifies a token through the openssl command: a backend's own check.
    @Test func theJWKSetVerifiesATokenWithOpenSSL() throws {
        try Self.withTokens { tokens, directory in
            let token = try Self.issue(tokens)
            let set = try #require(try JSONSerialization.jsonObject(with: Data(try tokens.keys.jwks().utf8)) as? [String: Any])
            let jwk = try #require((set["keys"] as? [[String: Any]])?.first)
            #expect(jwk["kty"] as? String == "EC" && jwk["crv"] as? String == "P-256" && jwk["alg"] as? String == "ES256")
            #expect(jwk["kid"] as? String == tokens.keys.current.id)
            let xText = try #require(jwk["x"] as? String)
            let yText = try #require(jwk["y"] as? String)
            let x = try #require(Base64URL.decode(xText))
            let y = try #require(Base64URL.decode(yText))
            // SubjectPublicKeyInfo for a P-256 point, then PEM: what the JWK alone describes.
            let spki = SHA256.bytes(hex: "3059301306072a8648ce3d020106082a8648ce3d030107034200")! + [4] + x + y
            let pem = "-----BEGIN PUBLIC KEY-----\n" + Data(spki).base64EncodedString(options: .lineLength64Characters) + "\n-----END PUBLIC KEY-----\n"
            try Data(pem.utf8).write(to: URL(fileURLWithPath: directory + "/public.pem"))
            let parts = Self.parts(token)
            try Data((parts[0] + "." + parts[1]).utf8).write(to: URL(fileURLWithPath: directory + "/input"))
            try Data(Self.der(ofRawSignature: try #require(Base64URL.decode(parts[2])))).write(to: URL(fileURLWithPath: directory + "/signature"))
            let verified = try Self.openssl(["dgst", "-sha256", "-verify", directory + "/public.pem", "-signature", directory + "/signature", directory + "/input"])
            #expect(verified.status == 0 && verified.output.contains("Verified OK"), "\(verified.output)")
            try Data((parts[0] + "." + parts[1] + "x").utf8).write(to: URL(fileURLWithPath: directory + "/input"))
            #expect(try Self.openssl(["dgst", "-sha256", "-verify", directory + "/public.pem", "-signature", directory + "/signature", directory + "/input"]).status != 0)
        }
    }

    @Test func refreshTokensCarryTheirInstallationAndAreKeptAsADigest() throws {
        let (token, refresh) = try RefreshToken.generate(project: "shop-app", fid: "eWkQ0JhLD2hnwthI-tkvWz")
        #expect(token.hasPrefix("rt1.shop-app.eWkQ0JhLD2hnwthI-tkvWz.") && token.count == "rt1.shop-app.eWkQ0JhLD2hnwthI-tkvWz.".count + 43)
        let parsed = try RefreshToken(parsing: Array(token.utf8))
        #expect(parsed == refresh && parsed.digest == SHA256.hash(token.utf8) && parsed.credentialID.count == 16)
        for bad in ["", "rt1.shop-app.eWkQ0JhLD2hnwthI-tkvWz", "rt2" + token.dropFirst(3), token + "A", "rt1.Shop.eWkQ0JhLD2hnwthI-tkvWz." + token.suffix(43)] {
            #expect(throws: CredentialError.self, "\(bad.prefix(20))") { try RefreshToken(parsing: Array(bad.utf8)) }
        }
    }

    /// Mutated and random tokens never crash the parser, and a mutation is never accepted.
    @Test func aFuzzedTokenIsRefusedNeverACrash() throws {
        try Self.withTokens { tokens, _ in
            let token = Array(try Self.issue(tokens).utf8)
            var random = SeededRandomNumberGenerator(seed: 42)
            let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/ {}\"".utf8)
            var accepted = 0
            for round in 0..<3000 {
                var bytes = token
                if round % 10 == 0 {
                    bytes = (0..<Int.random(in: 0...300, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
                } else {
                    for _ in 0..<Int.random(in: 1...4, using: &random) {
                        let index = Int.random(in: 0..<bytes.count, using: &random)
                        switch Int.random(in: 0...2, using: &random) {
                        case 0: bytes[index] = alphabet.randomElement(using: &random)!
                        case 1: bytes.remove(at: index)
                        default: bytes.insert(alphabet.randomElement(using: &random)!, at: index)
                        }
                        if bytes.isEmpty { bytes = [0x2E] }
                    }
                }
                if let _ = try? tokens.verify(bytes, now: Self.now + 1) {
                    accepted += 1
                    #expect(bytes == token, "only the token itself is accepted")
                }
            }
            #expect(accepted <= 300, "a few mutations write the same bytes back")
        }
    }

    /// ASN.1 DER of an ECDSA signature from its raw r ‖ s.
    static func der(ofRawSignature raw: [UInt8]) -> [UInt8] {
        func integer(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
            var value = Array(bytes.drop { $0 == 0 })
            if value.isEmpty { value = [0] }
            if value[0] & 0x80 != 0 { value.insert(0, at: 0) }
            return [0x02, UInt8(value.count)] + value
        }
        let body = integer(raw[0..<32]) + integer(raw[32..<64])
        return [0x30, UInt8(body.count)] + body
    }

    static func openssl(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let outcome = try ChildProcess.run("openssl", arguments)
        #expect(!outcome.timedOut, "openssl \(arguments.first ?? "") ran past its time")
        return (outcome.status, outcome.output + outcome.error)
    }
}
