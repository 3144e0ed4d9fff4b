import ServiceLifecycle
import Synchronization

/// Says fanoutd serves (the `listening` log line, the `--ready-file`) from inside the service
/// group, so that SIGTERM and SIGINT are already trapped for a graceful shutdown when a script or
/// supervisor learns it may use (or stop) the server. Announced before the group ran, a SIGTERM
/// right after it killed the process outright.
final class ReadinessAnnouncement: Service, Sendable {
    private let announce: @Sendable () throws -> Void
    private let failure = Mutex<(any Error)?>(nil)

    init(_ announce: @escaping @Sendable () throws -> Void) {
        self.announce = announce
    }

    /// Why announcing failed (the ready file could not be written), if it did; the group then
    /// shut down.
    var error: (any Error)? { self.failure.withLock { $0 } }

    func run() async throws {
        do {
            try self.announce()
        } catch {
            self.failure.withLock { $0 = error }
            throw error
        }
        try? await gracefulShutdown()
    }
}
