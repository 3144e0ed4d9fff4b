internal import FanoutWire

/// Which requests each principal may send: the one table the server consults, the docs print
/// (docs/security.md) and the tests walk (every opcode by every principal). A device's requests
/// pass a second check too: that they name only its own installation (`DeviceScope`).
enum Permissions {
    /// Who a connection speaks for.
    enum Principal: Hashable, CaseIterable, CustomStringConvertible {
        case admin, sender, consumer
        /// An app's key: it registers installations with their credentials (Firebase Installations' create).
        case app
        /// An installation, by its auth token.
        case device
        /// An installation, by its refresh token: it may only get an auth token or delete itself.
        case refresh

        init(role: Hello.Role) {
            switch role {
            case .admin: self = .admin
            case .sender: self = .sender
            case .consumer: self = .consumer
            case .device: self = .device
            case .app: self = .app
            }
        }

        var description: String {
            switch self {
            case .admin: return "admin"
            case .sender: return "sender"
            case .consumer: return "consumer"
            case .device: return "device"
            case .app: return "app"
            case .refresh: return "refresh-token"
            }
        }
    }

    /// Every request opcode, in protocol order.
    static let requestOpcodes: [Opcode] = [
        .hello, .ping, .createProject, .deleteProject, .listProjects, .snapshot, .jwks, .rotateSigningKey,
        .register, .refreshToken, .touch, .getInstallation, .deleteInstallation, .staleInstallations,
        .pruneExpired, .installationCount, .registerBatch, .registerBatchFIDs, .setAPNsToken, .installationByAPNsToken,
        .issueCredentials, .generateAuthToken,
        .bindDevice, .signOut, .linkUser, .getUser, .cleanUpAnonymousUsers, .listUsers, .setAnonymousCleanUp, .setLegacyInstanceIDs,
        .subscribe, .unsubscribe, .topicsOf, .listTopics, .subscriberCount, .audience,
        .send, .pending, .expireDeliveries, .stats,
        .attach, .attachGrouped, .grant, .acknowledge, .detach,
    ]

    /// Sends, audiences and reads that change nothing.
    private static let sender: Set<Opcode> = [
        .ping, .jwks, .listProjects, .getInstallation, .staleInstallations, .installationCount, .installationByAPNsToken,
        .getUser, .listUsers, .topicsOf, .listTopics, .subscriberCount, .audience, .send, .pending, .stats,
    ]

    /// A delivery worker's stream.
    private static let consumer: Set<Opcode> = [.ping, .jwks, .attach, .attachGrouped, .grant, .acknowledge, .detach]

    /// What an installation may do to itself (its auth token's connection).
    private static let device: Set<Opcode> = [
        .ping, .jwks, .refreshToken, .touch, .getInstallation, .deleteInstallation, .setAPNsToken,
        .signOut, .getUser, .subscribe, .unsubscribe, .topicsOf, .pending,
        .attach, .attachGrouped, .grant, .acknowledge, .detach,
    ]

    /// An app's key: REGISTER, and only with the credentials option for a new installation
    /// (`RequestExecutor` checks both).
    private static let app: Set<Opcode> = [.ping, .jwks, .register]

    /// What a refresh token allows, as Firebase Installations: a new auth token, or deleting itself.
    private static let refresh: Set<Opcode> = [.ping, .jwks, .generateAuthToken, .deleteInstallation]

    /// Whether `principal` may send `opcode` (HELLO is the handshake: never after it).
    static func allows(_ principal: Principal, _ opcode: Opcode) -> Bool {
        switch principal {
        case .admin: return opcode != .hello
        case .sender: return Self.sender.contains(opcode)
        case .consumer: return Self.consumer.contains(opcode)
        case .device: return Self.device.contains(opcode)
        case .refresh: return Self.refresh.contains(opcode)
        case .app: return Self.app.contains(opcode)
        }
    }
}
