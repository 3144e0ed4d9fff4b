internal import FanoutCore
import Foundation

/// The P-256 keys that sign installation auth tokens, kept in a directory (0700) of the data
/// directory: `manifest` lists each key's id, creation and retirement (UNIX seconds, 0 for the
/// current key), `KID.pem` holds each private key (0600). New tokens are signed with the current
/// key; a rotation makes a new current key and retires the old one, whose tokens stay valid until
/// they expire; `prune` deletes retired keys no token can still need. A key's id (`kid`) is its
/// RFC 7638 JWK thumbprint. Thread-safe.
public final class SigningKeys: Sendable {
    public struct Entry: Sendable {
        public let id: String
        let key: ES256Key
        public let createdAt: Int64
        /// When it stopped signing; nil for the current key.
        public let retiredAt: Int64?
    }

    private let directory: String
    private let entries: Locked<[Entry]>

    private init(directory: String, entries: [Entry]) {
        self.directory = directory
        self.entries = Locked(entries)
    }

    /// Opens the keys in `directory`, creating it and a first key when it has none.
    public static func open(directory: String, now: Int64) throws -> SigningKeys {
        let manifest = (directory as NSString).appendingPathComponent("manifest")
        guard FileManager.default.fileExists(atPath: manifest) else {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            let keys = SigningKeys(directory: directory, entries: [])
            _ = try keys.rotate(now: now)
            return keys
        }
        let text = try String(contentsOfFile: manifest, encoding: .utf8)
        var entries: [Entry] = []
        for (number, line) in text.split(separator: "\n").enumerated() where !line.hasPrefix("#") {
            let fields = line.split(separator: " ")
            guard fields.count == 3, let created = Int64(fields[1]), let retired = Int64(fields[2]) else {
                throw CryptoError("\(manifest) line \(number + 1): expected `kid created retired`")
            }
            let pem = try String(contentsOfFile: (directory as NSString).appendingPathComponent("\(fields[0]).pem"), encoding: .utf8)
            let key = try ES256Key(pem: pem)
            guard try Self.thumbprint(key) == fields[0] else {
                throw CryptoError("\(manifest) line \(number + 1): the key file does not hold key \(fields[0])")
            }
            entries.append(Entry(id: String(fields[0]), key: key, createdAt: created, retiredAt: retired == 0 ? nil : retired))
        }
        guard entries.filter({ $0.retiredAt == nil }).count == 1 else {
            throw CryptoError("\(manifest): exactly one key must be current (retired 0)")
        }
        return SigningKeys(directory: directory, entries: entries)
    }

    /// The key new tokens are signed with.
    public var current: Entry {
        self.entries.withLock { entries in entries.first { $0.retiredAt == nil } ?? entries[entries.count - 1] }
    }

    /// Every key whose tokens may still be valid, current first.
    public var all: [Entry] {
        self.entries.withLock { entries in entries.sorted { ($0.retiredAt ?? .max) > ($1.retiredAt ?? .max) } }
    }

    /// The key with id `kid`, if it is kept.
    func key(id: String) -> ES256Key? {
        self.entries.withLock { entries in entries.first { $0.id == id }?.key }
    }

    /// Makes a new current key and retires the one before; returns the new key's id.
    @discardableResult
    public func rotate(now: Int64) throws -> String {
        let key = try ES256Key.generate()
        let id = try Self.thumbprint(key)
        try SecretFile.write(try key.privateKeyPEM(), to: (self.directory as NSString).appendingPathComponent("\(id).pem"))
        let entries = self.entries.withLock { entries in
            entries = entries.map { $0.retiredAt == nil ? Entry(id: $0.id, key: $0.key, createdAt: $0.createdAt, retiredAt: now) : $0 }
            entries.append(Entry(id: id, key: key, createdAt: now, retiredAt: nil))
            return entries
        }
        try self.writeManifest(entries)
        return id
    }

    /// Deletes the retired keys retired longer than `tokenLifetime` seconds ago (every token they
    /// signed has expired); returns their ids.
    @discardableResult
    public func prune(now: Int64, tokenLifetime: Int64) throws -> [String] {
        let (kept, dropped) = self.entries.withLock { entries -> ([Entry], [Entry]) in
            let dropped = entries.filter { ($0.retiredAt ?? .max) <= now - tokenLifetime }
            entries.removeAll { ($0.retiredAt ?? .max) <= now - tokenLifetime }
            return (entries, dropped)
        }
        guard !dropped.isEmpty else { return [] }
        try self.writeManifest(kept)
        for entry in dropped { unlink((self.directory as NSString).appendingPathComponent("\(entry.id).pem")) }
        return dropped.map(\.id)
    }

    private func writeManifest(_ entries: [Entry]) throws {
        let lines = entries.map { "\($0.id) \($0.createdAt) \($0.retiredAt ?? 0)\n" }.joined()
        try SecretFile.write("# kid created retired (UNIX seconds; 0: the current key)\n" + lines, to: (self.directory as NSString).appendingPathComponent("manifest"))
    }

    /// The public keys as a JWK Set (RFC 7517): what a backend needs to verify auth tokens itself.
    public func jwks() throws -> String {
        try Self.jwks(of: self.all.map { ($0.id, $0.key) })
    }

    /// `keys` (their public halves) as a JWK Set, in the order given.
    public static func jwks(of keys: [(id: String, key: ES256Key)]) throws -> String {
        var set: [JSONValue] = []
        for (id, key) in keys {
            let (x, y) = try key.publicCoordinates()
            set.append(.object(JSONObject([
                .init(key: "kty", value: .string("EC")),
                .init(key: "crv", value: .string("P-256")),
                .init(key: "x", value: .string(Base64URL.encode(x))),
                .init(key: "y", value: .string(Base64URL.encode(y))),
                .init(key: "kid", value: .string(id)),
                .init(key: "alg", value: .string("ES256")),
                .init(key: "use", value: .string("sig")),
            ])))
        }
        return String(decoding: JSONWriter.encode(.object(JSONObject([.init(key: "keys", value: .array(set))]))), as: UTF8.self)
    }

    /// The public keys in PEM, each after a line with its id: what other servers need to accept
    /// this one's tokens (`publicKeys(parsing:)` reads it back).
    public func publicKeysText() throws -> String {
        try self.all.map { "\($0.id)\n\(try $0.key.publicKeyPEM())" }.joined()
    }

    /// The keys of a `publicKeysText()`, each checked against its id (the id is the key's
    /// thumbprint); nil when the text is not one.
    public static func publicKeys(parsing text: String) -> [(id: String, key: ES256Key)]? {
        var keys: [(id: String, key: ES256Key)] = []
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)[...]
        while let id = lines.popFirst(), !id.isEmpty {
            guard let end = lines.firstIndex(where: { $0.hasPrefix("-----END") }) else { return nil }
            let pem = lines[...end].joined(separator: "\n") + "\n"
            lines = lines[(end + 1)...]
            guard let key = try? ES256Key(pem: pem, isPublic: true), (try? Self.thumbprint(key)) == String(id) else { return nil }
            keys.append((String(id), key))
        }
        return keys
    }

    /// RFC 7638: base64url of the SHA-256 of `{"crv","kty","x","y"}` in that order, no spaces.
    static func thumbprint(_ key: ES256Key) throws -> String {
        let (x, y) = try key.publicCoordinates()
        let canonical = #"{"crv":"P-256","kty":"EC","x":"\#(Base64URL.encode(x))","y":"\#(Base64URL.encode(y))"}"#
        return Base64URL.encode(SHA256.hash(canonical.utf8))
    }
}
