/// The kind of a frame (docs/wire-protocol.md section 5). Requests are `0x01`-`0x7F`; the reply to
/// a request is its opcode with the high bit set; `0xF0`-`0xFF` are the server's own frames.
public struct Opcode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8

    public init(rawValue: UInt8) {
        self.rawValue = rawValue
    }

    public static let hello = Opcode(rawValue: 0x01)
    public static let ping = Opcode(rawValue: 0x02)
    public static let createProject = Opcode(rawValue: 0x10)
    public static let deleteProject = Opcode(rawValue: 0x11)
    public static let listProjects = Opcode(rawValue: 0x12)
    public static let snapshot = Opcode(rawValue: 0x13)
    public static let jwks = Opcode(rawValue: 0x14)
    public static let rotateSigningKey = Opcode(rawValue: 0x15)
    public static let register = Opcode(rawValue: 0x20)
    public static let refreshToken = Opcode(rawValue: 0x21)
    public static let touch = Opcode(rawValue: 0x22)
    public static let getInstallation = Opcode(rawValue: 0x23)
    public static let deleteInstallation = Opcode(rawValue: 0x24)
    public static let staleInstallations = Opcode(rawValue: 0x25)
    public static let pruneExpired = Opcode(rawValue: 0x26)
    public static let installationCount = Opcode(rawValue: 0x27)
    public static let registerBatch = Opcode(rawValue: 0x28)
    public static let setAPNsToken = Opcode(rawValue: 0x29)
    public static let installationByAPNsToken = Opcode(rawValue: 0x2A)
    public static let issueCredentials = Opcode(rawValue: 0x2B)
    public static let generateAuthToken = Opcode(rawValue: 0x2C)
    public static let registerBatchFIDs = Opcode(rawValue: 0x2D)
    public static let bindDevice = Opcode(rawValue: 0x30)
    public static let signOut = Opcode(rawValue: 0x31)
    public static let linkUser = Opcode(rawValue: 0x32)
    public static let getUser = Opcode(rawValue: 0x33)
    public static let cleanUpAnonymousUsers = Opcode(rawValue: 0x34)
    public static let listUsers = Opcode(rawValue: 0x35)
    public static let setAnonymousCleanUp = Opcode(rawValue: 0x36)
    public static let setLegacyInstanceIDs = Opcode(rawValue: 0x37)
    public static let subscribe = Opcode(rawValue: 0x40)
    public static let unsubscribe = Opcode(rawValue: 0x41)
    public static let topicsOf = Opcode(rawValue: 0x42)
    public static let listTopics = Opcode(rawValue: 0x43)
    public static let subscriberCount = Opcode(rawValue: 0x44)
    public static let audience = Opcode(rawValue: 0x45)
    public static let send = Opcode(rawValue: 0x50)
    public static let pending = Opcode(rawValue: 0x51)
    public static let expireDeliveries = Opcode(rawValue: 0x52)
    public static let stats = Opcode(rawValue: 0x53)
    public static let attach = Opcode(rawValue: 0x60)
    public static let grant = Opcode(rawValue: 0x61)
    public static let acknowledge = Opcode(rawValue: 0x62)
    public static let detach = Opcode(rawValue: 0x63)
    public static let attachGrouped = Opcode(rawValue: 0x64)

    public static let delivery = Opcode(rawValue: 0xF0)
    public static let deliveries = Opcode(rawValue: 0xF1)
    public static let goAway = Opcode(rawValue: 0xFE)
    public static let error = Opcode(rawValue: 0xFF)

    /// The request's name as docs/wire-protocol.md spells it (`SUBSCRIBE`), or the hex of an
    /// opcode that has none.
    public var name: String { Self.names[self.rawValue] ?? self.description }

    private static let names: [UInt8: String] = [
        0x01: "HELLO", 0x02: "PING", 0x10: "CREATE_PROJECT", 0x11: "DELETE_PROJECT", 0x12: "LIST_PROJECTS", 0x13: "SNAPSHOT",
        0x14: "JWKS", 0x15: "ROTATE_SIGNING_KEY", 0x20: "REGISTER", 0x21: "REFRESH_TOKEN", 0x22: "TOUCH", 0x23: "GET_INSTALLATION",
        0x24: "DELETE_INSTALLATION", 0x25: "STALE_INSTALLATIONS", 0x26: "PRUNE_EXPIRED", 0x27: "INSTALLATION_COUNT",
        0x28: "REGISTER_BATCH", 0x29: "SET_APNS_TOKEN", 0x2A: "INSTALLATION_BY_APNS_TOKEN", 0x2B: "ISSUE_CREDENTIALS",
        0x2C: "GENERATE_AUTH_TOKEN", 0x2D: "REGISTER_BATCH_FIDS", 0x30: "BIND_DEVICE", 0x31: "SIGN_OUT", 0x32: "LINK_USER", 0x33: "GET_USER",
        0x34: "CLEAN_UP_ANONYMOUS", 0x35: "LIST_USERS", 0x36: "SET_ANONYMOUS_CLEANUP", 0x37: "SET_LEGACY_INSTANCE_IDS",
        0x40: "SUBSCRIBE", 0x41: "UNSUBSCRIBE", 0x42: "TOPICS_OF", 0x43: "LIST_TOPICS", 0x44: "SUBSCRIBER_COUNT", 0x45: "AUDIENCE",
        0x50: "SEND", 0x51: "PENDING", 0x52: "EXPIRE_DELIVERIES", 0x53: "STATS",
        0x60: "ATTACH", 0x61: "GRANT", 0x62: "ACK", 0x63: "DETACH", 0x64: "ATTACH_GROUPED",
        0xF0: "DELIVERY", 0xF1: "DELIVERIES", 0xFE: "GOAWAY", 0xFF: "ERROR",
    ]

    /// Whether a client may send it.
    public var isRequest: Bool { self.rawValue >= 0x01 && self.rawValue <= 0x7F }

    /// The opcode of the reply to this request.
    public var reply: Opcode { Opcode(rawValue: self.rawValue | 0x80) }

    /// The request this reply answers (for reply opcodes `0x81`-`0xEF`).
    public var request: Opcode { Opcode(rawValue: self.rawValue & 0x7F) }

    public var description: String { "0x" + String(self.rawValue, radix: 16, uppercase: true) }
}
