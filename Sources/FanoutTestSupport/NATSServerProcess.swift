import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A `nats-server` with JetStream on loopback, on a port it picks (`-p -1`; its ports file says
/// which), storing in `directory`: for the cluster tests and the load harness. `kill()` (SIGKILL)
/// and `restart()` (same port, same store) make a NATS outage on demand.
public final class NATSServerProcess: @unchecked Sendable {
    // Safe to share: `url` and `process` change only in `start` and `kill`, which a test or the
    // harness calls in sequence from one task.
    public let directory: String
    private let executable: String
    private var process: Process?
    /// `nats://127.0.0.1:PORT`, once started.
    public private(set) var url = ""

    /// Debian's `nats-server` (`make deps` installs it), or nil when it is missing.
    public static var installedExecutable: String? {
        ["/usr/sbin/nats-server", "/usr/bin/nats-server", "/usr/local/bin/nats-server"].first(where: FileManager.default.isExecutableFile)
    }

    public init(executable: String, directory: String) throws {
        self.executable = executable
        self.directory = directory
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    /// The process id while it runs.
    public var pid: Int32? { self.process.map(\.processIdentifier) }

    /// Starts the server on `port` (-1: one it picks) and returns once its ports file says it
    /// listens. Generous by default: a whole test suite may be starting on two cores.
    public func start(port: Int = -1, timeout: Duration = .seconds(120)) async throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: self.executable)
        let logFile = self.directory + "/nats-server.log"
        process.arguments = ["-js", "-a", "127.0.0.1", "-p", "\(port)", "-sd", self.directory + "/store", "--ports_file_dir", self.directory, "-l", logFile]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        self.process = process
        let portsFile = "\(self.directory)/nats-server_\(process.processIdentifier).ports"
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline, process.isRunning {
            if let data = FileManager.default.contents(atPath: portsFile),
                let ports = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
                let first = (ports["nats"] as? [String])?.first
            {
                self.url = first
                return
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        let log = (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "(no log)"
        throw NATSServerError(description: "nats-server wrote no ports file (running: \(process.isRunning)); its log:\n\(log)")
    }

    /// Starts it again on the same port with the same store.
    public func restart() async throws {
        guard let port = URLComponents(string: self.url)?.port else { throw NATSServerError(description: "nats-server was never started") }
        try await self.start(port: port)
    }

    /// SIGKILL, as a crash would, and wait until it is gone.
    public func kill() {
        guard let process = self.process else { return }
        if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        self.process = nil
    }

    deinit {
        self.kill()
    }
}

/// Why a `nats-server` did not start.
public struct NATSServerError: Error, CustomStringConvertible {
    public var description: String
}
