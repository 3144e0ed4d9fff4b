internal import FanoutWire

/// Which requests each principal may send: the one table the server consults, the docs print
/// (docs/security.md) and the tests walk (every opcode by every role). A device's requests pass a
/// second check too: that they name only its own installation (`DeviceScope`).
enum Permissions {
    /// Every request opcode, in protocol order.
    static let requestOpcodes: [Opcode] = [
        .hello, .ping, .createProject, .deleteProject, .listProjects, .snapshot,
        .register, .refreshToken, .touch, .getInstallation, .deleteInstallation, .staleInstallations,
        .pruneExpired, .installationCount, .registerBatch, .setAPNsToken, .installationByAPNsToken,
        .bindDevice, .signOut, .linkUser, .getUser, .cleanUpAnonymousUsers, .listUsers, .setAnonymousCleanUp,
        .subscribe, .unsubscribe, .topicsOf, .listTopics, .subscriberCount, .audience,
        .send, .pending, .expireDeliveries, .stats,
        .attach, .grant, .acknowledge, .detach,
    ]

    /// Sends, audiences and reads that change nothing.
    private static let sender: Set<Opcode> = [
        .ping, .listProjects, .getInstallation, .staleInstallations, .installationCount, .installationByAPNsToken,
        .getUser, .listUsers, .topicsOf, .listTopics, .subscriberCount, .audience, .send, .pending, .stats,
    ]

    /// A delivery worker's stream.
    private static let consumer: Set<Opcode> = [.ping, .attach, .grant, .acknowledge, .detach]

    /// What an installation may do to itself (its auth token's connection).
    private static let device: Set<Opcode> = [
        .ping, .refreshToken, .touch, .getInstallation, .deleteInstallation, .setAPNsToken,
        .signOut, .getUser, .subscribe, .unsubscribe, .topicsOf, .pending,
        .attach, .grant, .acknowledge, .detach,
    ]

    /// Whether a connection in `role` may send `opcode` (HELLO is the handshake: never after it).
    static func allows(_ role: Hello.Role, _ opcode: Opcode) -> Bool {
        switch role {
        case .admin: return opcode != .hello
        case .sender: return Self.sender.contains(opcode)
        case .consumer: return Self.consumer.contains(opcode)
        case .device: return Self.device.contains(opcode)
        }
    }
}
