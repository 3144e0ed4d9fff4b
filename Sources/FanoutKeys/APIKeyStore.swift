public import FanoutWire

/// A line of a key file that cannot be read.
public struct APIKeyFileError: Error, CustomStringConvertible {
    public var line: Int
    public var message: String

    public init(line: Int, message: String) {
        self.line = line
        self.message = message
    }

    public var description: String { self.line > 0 ? "line \(self.line): \(self.message)" : self.message }
}

/// The keys a server accepts, read from a key file. One key per line, `#` starts a comment:
///
/// ```
/// # name     role      projects   SHA-256 of the key
/// admin      admin     *          sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
/// workers    consumer  shop,news  sha256:60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752
/// ```
///
/// Names are 1 to 64 of `A-Z a-z 0-9 . _ -`, unique in the file; the role is `admin`, `sender` or
/// `consumer`; projects are comma-separated project ids, or `*` for every project. A line of the
/// first format (`key role projects`: the key in clear) is still read; `clearKeyLines` counts them,
/// and `text` writes them back hashed.
public struct APIKeyStore: Sendable, Equatable {
    public private(set) var keys: [APIKey]
    /// How many keys the file held in clear (the first format).
    public private(set) var clearKeyLines = 0
    /// The first admin key for every project the file held in clear, if any (to hand to the CLI
    /// when the file is rewritten hashed).
    public private(set) var firstClearAdminKey: String?

    public init(_ keys: [APIKey]) {
        self.keys = keys
    }

    /// Parses a key file's text.
    public init(parsing text: String) throws(APIKeyFileError) {
        self.keys = []
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" })
            if fields.isEmpty { continue }
            let number = index + 1
            let key: APIKey
            switch fields.count {
            case 4:
                guard APIKey.isValidName(fields[0]) else {
                    throw APIKeyFileError(line: number, message: "a key name is 1 to \(APIKey.maximumNameLength) of A-Z a-z 0-9 . _ -")
                }
                guard fields[3].hasPrefix("sha256:"), let digest = SHA256.bytes(hex: fields[3].dropFirst("sha256:".count)), digest.count == 32 else {
                    throw APIKeyFileError(line: number, message: "the fourth field is sha256: and 64 hex digits")
                }
                key = APIKey(name: String(fields[0]), role: try Self.role(fields[1], line: number), projects: try Self.projects(fields[2], line: number), digest: digest)
            case 3:
                let clear = Array(fields[0].utf8)
                guard clear.count >= APIKey.minimumLength, clear.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                    throw APIKeyFileError(line: number, message: "a key is at least \(APIKey.minimumLength) printable ASCII characters")
                }
                let digest = SHA256.hash(clear)
                key = APIKey(
                    name: "key-" + SHA256.hex(digest.prefix(4)), role: try Self.role(fields[1], line: number),
                    projects: try Self.projects(fields[2], line: number), digest: digest
                )
                self.clearKeyLines += 1
                if self.firstClearAdminKey == nil, key.role == .admin, key.projects == .all {
                    self.firstClearAdminKey = String(fields[0])
                }
            default:
                throw APIKeyFileError(line: number, message: "expected `name role projects sha256:HEX`, found \(fields.count) fields")
            }
            guard !self.keys.contains(where: { $0.name == key.name }) else {
                throw APIKeyFileError(line: number, message: "the name \(key.name) is used twice")
            }
            guard !self.keys.contains(where: { $0.digest == key.digest }) else {
                throw APIKeyFileError(line: number, message: "the key of \(key.name) is listed twice")
            }
            self.keys.append(key)
        }
    }

    private static func role(_ field: Substring, line: Int) throws(APIKeyFileError) -> Hello.Role {
        guard let role = APIKey.keyRoles.first(where: { "\($0)" == field }) else {
            throw APIKeyFileError(line: line, message: "the role is `admin`, `sender`, `consumer` or `app`, not `\(field)`")
        }
        return role
    }

    private static func projects(_ field: Substring, line: Int) throws(APIKeyFileError) -> APIKey.Projects {
        if field == "*" { return .all }
        let names = field.split(separator: ",").map(String.init)
        guard !names.isEmpty, names.allSatisfy({ !$0.isEmpty && $0 != "*" }) else {
            throw APIKeyFileError(line: line, message: "projects are `*` or a comma-separated list")
        }
        return .only(Set(names))
    }

    /// The key whose digest is the SHA-256 of `credential`, compared with every configured key in
    /// constant time (`CRYPTO_memcmp`).
    public func authenticate(_ credential: [UInt8]) -> APIKey? {
        let digest = SHA256.hash(credential)
        var match: APIKey?
        for key in self.keys where SHA256.constantTimeEqual(key.digest, digest) && match == nil {
            match = key
        }
        return match
    }

    /// Adds a key; refused when its name is taken.
    public mutating func add(_ key: APIKey) throws(APIKeyFileError) {
        guard !self.keys.contains(where: { $0.name == key.name }) else {
            throw APIKeyFileError(line: 0, message: "a key named \(key.name) exists already")
        }
        self.keys.append(key)
    }

    /// Removes the key named `name`; false when there is none.
    public mutating func remove(named name: String) -> Bool {
        guard let index = self.keys.firstIndex(where: { $0.name == name }) else { return false }
        self.keys.remove(at: index)
        return true
    }

    /// The file text of the store, every key hashed.
    public var text: String {
        "# fanoutd API keys: name role projects sha256 (docs/security.md); `fanout key` manages them\n"
            + self.keys.map { $0.line + "\n" }.joined()
    }
}
