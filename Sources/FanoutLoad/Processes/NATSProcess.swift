import Foundation

/// A `nats-server` with JetStream the harness starts on a loopback port it picks (`-p -1`, read
/// from its ports file), storing in `directory`. `make` installs Debian's nats-server.
final class NATSProcess: @unchecked Sendable {
    // Safe to share: `url` and `process` change only in `start` and `kill`, called in sequence by
    // one task.
    let directory: String
    private(set) var url = ""
    private var process: Process?

    init(directory: String) throws {
        self.directory = directory
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    /// Starts the server and returns once its ports file says it listens.
    func start(timeout: Duration = .seconds(60)) async throws {
        guard let executable = ["/usr/sbin/nats-server", "/usr/bin/nats-server", "/usr/local/bin/nats-server"].first(where: FileManager.default.isExecutableFile) else {
            throw LoadError("nats-server is not installed (apt: nats-server; `make deps` installs it)")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["-js", "-a", "127.0.0.1", "-p", "-1", "-sd", self.directory + "/store", "--ports_file_dir", self.directory, "-l", self.directory + "/nats-server.log"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        self.process = process
        let portsFile = "\(self.directory)/nats-server_\(process.processIdentifier).ports"
        self.url = try await process.waitUntilReady("nats-server", readiness: "listened", timeout: timeout, polling: .milliseconds(10)) { () async -> String? in
            guard let data = FileManager.default.contents(atPath: portsFile),
                let ports = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
            else { return nil }
            return (ports["nats"] as? [String])?.first
        }
    }

    var resources: ProcessResources? {
        self.process.flatMap { ProcessResources.of(pid: $0.processIdentifier) }
    }

    /// SIGKILL, and wait until it is gone.
    func kill() {
        self.process?.killAndWait()
        self.process = nil
    }

    deinit {
        self.kill()
    }
}
