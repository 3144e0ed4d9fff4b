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
    /// With `cluster`, the server is one of a JetStream cluster: its name, its route port and the
    /// routes to every member (`NATSServerProcess.cluster`).
    public func start(port: Int = -1, cluster: Membership? = nil, timeout: Duration = .seconds(120)) async throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: self.executable)
        let logFile = self.directory + "/nats-server.log"
        process.arguments = ["-js", "-a", "127.0.0.1", "-p", "\(port)", "-sd", self.directory + "/store", "--ports_file_dir", self.directory, "-l", logFile]
        if let cluster {
            process.arguments! += [
                "-n", cluster.name, "--cluster_name", "fanout", "--cluster", "nats://127.0.0.1:\(cluster.routePort)",
                "--routes", cluster.routePorts.map { "nats://127.0.0.1:\($0)" }.joined(separator: ","),
            ]
            self.membership = cluster
        }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        self.process = process
        let portsFile = "\(self.directory)/nats-server_\(process.processIdentifier).ports"
        let deadline = ContinuousClock.now + timeout
        // The file is looked at after every wait, the last one too: a test process whose
        // cooperative threads were all busy may wake this task only after the deadline.
        while true {
            if let data = FileManager.default.contents(atPath: portsFile),
                let ports = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
                let first = (ports["nats"] as? [String])?.first
            {
                self.url = first
                return
            }
            guard ContinuousClock.now < deadline, process.isRunning else { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        let log = (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "(no log)"
        throw NATSServerError(description: "nats-server wrote no ports file (running: \(process.isRunning)); its log:\n\(log)")
    }

    /// Starts it again on the same port with the same store (and the same cluster).
    public func restart() async throws {
        guard let port = URLComponents(string: self.url)?.port else { throw NATSServerError(description: "nats-server was never started") }
        try await self.start(port: port, cluster: self.membership)
    }

    /// A member of a JetStream cluster on loopback.
    public struct Membership: Sendable {
        public var name: String
        public var routePort: Int
        /// Every member's route port, this one's included.
        public var routePorts: [Int]
    }

    private var membership: Membership?

    /// `count` servers forming one JetStream cluster, each in `directory/nats-N`, started; their
    /// client URLs are `url`s. The route ports are `LoopbackPort.free()`'s.
    public static func cluster(_ count: Int, executable: String, directory: String) async throws -> [NATSServerProcess] {
        let routePorts = try (0..<count).map { _ in try LoopbackPort.free() }
        var servers: [NATSServerProcess] = []
        for index in 0..<count {
            let server = try NATSServerProcess(executable: executable, directory: "\(directory)/nats-\(index + 1)")
            try await server.start(cluster: Membership(name: "nats-\(index + 1)", routePort: routePorts[index], routePorts: routePorts))
            servers.append(server)
        }
        return servers
    }

    /// SIGKILL, as a crash would, and wait until it is gone.
    public func kill() {
        guard let process = self.process else { return }
        if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
        process.waitForExit(within: .seconds(60))
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
