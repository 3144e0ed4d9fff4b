internal import FanoutCore
public import FanoutWire

/// A key the server accepts, as its key file holds it: a name, the role it carries, the projects it
/// may use, and the SHA-256 of the key (the key itself is never stored; docs/security.md).
public struct APIKey: Hashable, Sendable, CustomStringConvertible {
    /// The projects a key covers.
    public enum Projects: Hashable, Sendable {
        case all
        case only(Set<String>)

        public func contains(_ project: String) -> Bool {
            switch self {
            case .all: return true
            case .only(let projects): return projects.contains(project)
            }
        }

        /// As WELCOME lists them: `["*"]` for all.
        public var names: [String] {
            switch self {
            case .all: return ["*"]
            case .only(let projects): return projects.sorted()
            }
        }
    }

    /// Shortest accepted key, in bytes.
    public static let minimumLength = 16
    /// Longest key name, in bytes.
    public static let maximumNameLength = 64

    /// Names the key in listings, logs and `fanout key revoke`; not secret.
    public let name: String
    /// `admin`, `sender` or `consumer`.
    public let role: Hello.Role
    public let projects: Projects
    /// SHA-256 of the key's bytes.
    public let digest: [UInt8]

    public init(name: String, role: Hello.Role, projects: Projects, digest: [UInt8]) {
        self.name = name
        self.role = role
        self.projects = projects
        self.digest = digest
    }

    /// The entry for a key whose clear bytes are `secret` (for embedders that hold their keys elsewhere).
    public init(name: String, role: Hello.Role, projects: Projects, secret: some Collection<UInt8>) {
        self.init(name: name, role: role, projects: projects, digest: SHA256.hash(secret))
    }

    /// The roles a key may carry (a device proves itself with an installation token, not a key).
    public static let keyRoles: [Hello.Role] = [.admin, .sender, .consumer, .app]

    /// Whether a key of this role may open a connection in `role`: an admin key in any key role,
    /// the others only in their own.
    public func mayConnect(as role: Hello.Role) -> Bool {
        guard Self.keyRoles.contains(role) else { return false }
        return self.role == .admin || self.role == role
    }

    /// Whether `name` may name a key: 1 to 64 of `A-Z a-z 0-9 . _ -`.
    public static func isValidName(_ name: some StringProtocol) -> Bool {
        let utf8 = name.utf8
        return (1...Self.maximumNameLength).contains(utf8.count) && utf8.allSatisfy { c in
            (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z")) || (c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z"))
                || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) || c == UInt8(ascii: ".") || c == UInt8(ascii: "_") || c == UInt8(ascii: "-")
        }
    }

    /// A fresh random key, `fk_` and 48 hex digits from the system CSPRNG: the clear key (shown once)
    /// and the entry the key file keeps.
    /// - Throws: when the CSPRNG fails.
    public static func generate(name: String, role: Hello.Role, projects: Projects) throws -> (secret: String, key: APIKey) {
        let secret = "fk_" + SHA256.hex(try SecureRandom.bytes(24))
        return (secret, APIKey(name: name, role: role, projects: projects, digest: SHA256.hash(secret.utf8)))
    }

    /// The key file line for this key (see `APIKeyStore`).
    public var line: String {
        "\(self.name) \(self.role) \(self.projects.names.joined(separator: ",")) sha256:\(SHA256.hex(self.digest))"
    }

    /// Never the key or its digest.
    public var description: String { "<\(self.role) key \(self.name) for \(self.projects.names.joined(separator: ","))>" }
}
