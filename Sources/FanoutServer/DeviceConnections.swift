internal import FanoutCore
internal import NIOCore

/// The server's open device connections by project. After a change that can revoke installation
/// credentials (a deletion, a prune, new credentials, a project's deletion), `recheck` asks each
/// device connection of the project to check its credential against the engine; one whose
/// installation is gone, or whose credentials were replaced, ends with GOAWAY `UNAUTHENTICATED`.
final class DeviceConnections: Sendable {
    /// The user event `recheck` sends.
    struct Recheck: Sendable {}

    private let channels = Locked<[String: [ObjectIdentifier: any Channel]]>([:])

    func add(_ channel: any Channel, project: String) {
        self.channels.withLock { $0[project, default: [:]][ObjectIdentifier(channel)] = channel }
    }

    func remove(_ channel: any Channel) {
        let key = ObjectIdentifier(channel)
        self.channels.withLock { channels in
            for project in channels.keys where channels[project]?.removeValue(forKey: key) != nil {
                if channels[project]?.isEmpty == true { channels[project] = nil }
            }
        }
    }

    func recheck(project: String) {
        let open = self.channels.withLock { Array(($0[project] ?? [:]).values) }
        for channel in open { channel.pipeline.fireUserInboundEventTriggered(Recheck()) }
    }

    /// Every project's device connections check (after a sweep over all projects).
    func recheckAll() {
        let open = self.channels.withLock { $0.values.flatMap(\.values) }
        for channel in open { channel.pipeline.fireUserInboundEventTriggered(Recheck()) }
    }
}
