internal import CFanoutOpenSSL
public import FanoutWire

/// A credential the server accepts: the key, the role it carries and the projects it may use.
public struct APIKey: Sendable, CustomStringConvertible {
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

    public let key: [UInt8]
    public let role: Hello.Role
    public let projects: Projects

    public init(key: [UInt8], role: Hello.Role, projects: Projects) {
        self.key = key
        self.role = role
        self.projects = projects
    }

    /// A fresh random key, `fk_` and 48 hex digits from the system CSPRNG (OpenSSL `RAND_bytes`).
    /// - Throws: when the CSPRNG fails.
    public static func generate(role: Hello.Role, projects: Projects) throws -> APIKey {
        var random = [UInt8](repeating: 0, count: 24)
        let status = random.withUnsafeMutableBytes { buffer in
            RAND_bytes(buffer.baseAddress, Int32(buffer.count))
        }
        guard status == 1 else {
            throw APIKeyFileError(line: 0, message: "the system CSPRNG (RAND_bytes) failed")
        }
        let digits = Array("0123456789abcdef".utf8)
        var key = Array("fk_".utf8)
        for byte in random {
            key.append(digits[Int(byte >> 4)])
            key.append(digits[Int(byte & 0x0F)])
        }
        return APIKey(key: key, role: role, projects: projects)
    }

    /// The key file line for this key (see `APIKeyStore`).
    public var line: String {
        let projects = self.projects.names.joined(separator: ",")
        return "\(String(decoding: self.key, as: UTF8.self)) \(self.role) \(projects)"
    }

    /// Never the key itself.
    public var description: String { "<\(self.role) key for \(self.projects.names.joined(separator: ","))>" }
}

/// A line of a key file that cannot be read.
public struct APIKeyFileError: Error, CustomStringConvertible {
    public var line: Int
    public var message: String

    public var description: String { self.line > 0 ? "line \(self.line): \(self.message)" : self.message }
}

/// The keys a server accepts, read from a key file. One key per line, `#` starts a comment:
///
/// ```
/// # key                                              role      projects
/// fk_2b7e151628aed2a6abf7158809cf4f3c762e7160f38b4da5 admin     *
/// fk_6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c consumer  shop,news
/// ```
///
/// A key is at least 16 printable ASCII characters without spaces; the role is `admin` or
/// `consumer`; projects are comma-separated project ids, or `*` for every project.
public struct APIKeyStore: Sendable {
    public private(set) var keys: [APIKey]

    public init(_ keys: [APIKey]) {
        self.keys = keys
    }

    /// Parses a key file's text.
    public init(parsing text: String) throws(APIKeyFileError) {
        var keys: [APIKey] = []
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" })
            if fields.isEmpty { continue }
            guard fields.count == 3 else {
                throw APIKeyFileError(line: index + 1, message: "expected `key role projects`, found \(fields.count) fields")
            }
            let key = Array(fields[0].utf8)
            guard key.count >= APIKey.minimumLength, key.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                throw APIKeyFileError(line: index + 1, message: "a key is at least \(APIKey.minimumLength) printable ASCII characters")
            }
            let role: Hello.Role
            switch fields[1] {
            case "admin": role = .admin
            case "consumer": role = .consumer
            default: throw APIKeyFileError(line: index + 1, message: "the role is `admin` or `consumer`, not `\(fields[1])`")
            }
            let projects: APIKey.Projects
            if fields[2] == "*" {
                projects = .all
            } else {
                let names = fields[2].split(separator: ",").map(String.init)
                guard !names.isEmpty, names.allSatisfy({ !$0.isEmpty && $0 != "*" }) else {
                    throw APIKeyFileError(line: index + 1, message: "projects are `*` or a comma-separated list")
                }
                projects = .only(Set(names))
            }
            keys.append(APIKey(key: key, role: role, projects: projects))
        }
        self.keys = keys
    }

    /// The key matching `credential`, compared with every configured key in constant time
    /// (OpenSSL `CRYPTO_memcmp`; only the lengths are compared directly).
    public func authenticate(_ credential: [UInt8]) -> APIKey? {
        var match: APIKey?
        for key in self.keys where key.key.count == credential.count {
            let equal = key.key.withUnsafeBytes { a in
                credential.withUnsafeBytes { b in CRYPTO_memcmp(a.baseAddress, b.baseAddress, a.count) == 0 }
            }
            if equal, match == nil { match = key }
        }
        return match
    }

    /// The file text of the store.
    public var text: String {
        "# fanoutd API keys: key role projects (see docs/operations.md)\n" + self.keys.map(\.line).joined(separator: "\n") + "\n"
    }
}
