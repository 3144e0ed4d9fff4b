/// The first frame of a connection: who the client is and how it proves it (docs/wire-protocol.md section 4).
public struct Hello: Hashable, Sendable {
    public enum Role: UInt8, Hashable, Sendable, CustomStringConvertible {
        /// Everything in the key's projects.
        case admin = 1
        /// Delivery workers: attach, grant, acknowledge, detach.
        case consumer = 2
        /// Sends, audiences and read-only lookups.
        case sender = 3
        /// One installation, proven by its auth token (or its refresh token, to get an auth token).
        case device = 4
        /// The key an app ships with: registers new installations and gets their credentials,
        /// as Firebase Installations' create does with an app's API key. Nothing else.
        case app = 5

        public var description: String {
            switch self {
            case .admin: return "admin"
            case .consumer: return "consumer"
            case .sender: return "sender"
            case .device: return "device"
            case .app: return "app"
            }
        }
    }

    public enum Credential: Hashable, Sendable {
        /// An API key from the server's key file.
        case apiKey([UInt8])
        /// An installation auth token (an ES256 JWT): a device acting as its installation.
        case installationAuthToken([UInt8])
        /// An installation refresh token: a device that may only get a new auth token or delete itself.
        case installationRefreshToken([UInt8])
        /// A credential kind this side does not know.
        case unknown(kind: UInt8, [UInt8])
    }

    /// Longest client name, in bytes.
    public static let maximumClientNameLength = 64

    public var role: Role
    public var credential: Credential
    public var clientName: String

    public init(role: Role, credential: Credential, clientName: String = "") {
        self.role = role
        self.credential = credential
        self.clientName = clientName
    }
}

/// The server's answer to a valid HELLO: the limits of this connection.
public struct Welcome: Hashable, Sendable {
    public var version: UInt16
    /// The largest payload either side may send.
    public var maximumPayloadSize: UInt32
    /// Milliseconds of silence after which the server closes the connection.
    public var idleTimeoutMilliseconds: UInt32
    /// The largest total credit a consumer may hold.
    public var maximumCredit: UInt32
    /// Requests the server works on at once for this connection.
    public var maximumInFlight: UInt32
    /// The projects the key may use; `["*"]` for all.
    public var projects: [String]

    public init(
        version: UInt16 = UInt16(FrameHeader.currentVersion),
        maximumPayloadSize: UInt32,
        idleTimeoutMilliseconds: UInt32,
        maximumCredit: UInt32,
        maximumInFlight: UInt32,
        projects: [String]
    ) {
        self.version = version
        self.maximumPayloadSize = maximumPayloadSize
        self.idleTimeoutMilliseconds = idleTimeoutMilliseconds
        self.maximumCredit = maximumCredit
        self.maximumInFlight = maximumInFlight
        self.projects = projects
    }
}
