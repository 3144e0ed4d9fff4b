import FanoutTestSupport
import Foundation
import NIOCore
import NIOPosix

/// A `redis-server` the harness starts on a loopback port with an append-only file, fsynced as
/// fanoutd's durability is: `always` as `appendfsync always`, `interval:MS` as `everysec`, `none`
/// as `no`. Installed with apt when it is missing.
public final class RedisProcess: @unchecked Sendable {
    // Safe to share: `port` and `process` change only in `start`, `stop` and `kill`, which the
    // harness calls in sequence from one task; `port` is read by that task after `start` returned.
    public let directory: String
    public private(set) var port = 0
    private var process: Process?

    public init(directory: String) throws {
        self.directory = directory
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    /// The `appendfsync` policy matching a fanoutd `--durability` value.
    public static func appendFsync(matching durability: String) -> String {
        if durability == "always" { return "always" }
        if durability.hasPrefix("interval") { return "everysec" }
        return "no"
    }

    /// `redis-server` on the PATH, installing the Debian package when there is none.
    public static func executable() throws -> String {
        if let found = Self.which("redis-server") { return found }
        FileHandle.standardError.write(Data("fanout-load: redis-server is missing; installing it with apt-get\n".utf8))
        let prefix = getuid() == 0 ? "" : "sudo "
        let install = Process()
        install.executableURL = URL(fileURLWithPath: "/bin/sh")
        install.arguments = ["-c", "\(prefix)apt-get update -q && \(prefix)env DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-server"]
        install.standardOutput = FileHandle.standardError
        try install.run()
        install.waitUntilExit()
        guard install.terminationStatus == 0, let found = Self.which("redis-server") else {
            throw LoadError("redis-server is not installed and apt-get could not install it")
        }
        return found
    }

    private static func which(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") + ["/usr/sbin", "/usr/bin"] {
            let candidate = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    /// Starts the server and returns once it answers PING.
    public func start(appendFsync: String, timeout: Duration = .seconds(60)) async throws {
        let executable = try Self.executable()
        self.port = try LoopbackPort.free()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = [
            "--port", String(self.port), "--bind", "127.0.0.1", "--dir", self.directory,
            "--appendonly", "yes", "--appendfsync", appendFsync, "--save", "",
            "--daemonize", "no", "--protected-mode", "no", "--logfile", "",
        ]
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        self.process = process
        try await process.waitUntilReady("redis-server", readiness: "answered", timeout: timeout, polling: .milliseconds(10)) { () async -> Void? in
            guard let connection = try? await RedisConnection.connect(host: "127.0.0.1", port: self.port) else { return nil }
            let pong = try? await connection.send(["PING"])
            try? await connection.close()
            return pong == .simpleString("PONG") ? () : nil
        }
    }

    public var pid: Int32? { self.process.map(\.processIdentifier) }

    public var resources: ProcessResources? {
        self.pid.flatMap { ProcessResources.of(pid: $0) }
    }

    /// Redis's own count of the memory its data uses (`INFO memory`, `used_memory`).
    public static func usedMemory(_ connection: RedisConnection) async throws -> Int {
        guard case .bulkString(let bytes?) = try await connection.send(["INFO", "memory"]) else {
            throw LoadError("INFO memory gave no text")
        }
        for line in String(decoding: bytes, as: UTF8.self).split(whereSeparator: \.isNewline) where line.hasPrefix("used_memory:") {
            if let value = Int(line.dropFirst("used_memory:".count)) { return value }
        }
        throw LoadError("INFO memory has no used_memory")
    }

    /// Asks the server to shut down (`SHUTDOWN`: the append-only file is synced), and waits until
    /// it is gone. A signal would not do: a child started from a Swift concurrency thread inherits
    /// that thread's mask, in which SIGTERM is blocked.
    public func stop() async {
        guard let process = self.process else { return }
        if process.isRunning, let connection = try? await RedisConnection.connect(host: "127.0.0.1", port: self.port) {
            // Redis closes the connection instead of replying when it shuts down.
            let reply = try? await connection.send(["SHUTDOWN"])
            try? await connection.close()
            if reply == nil {
                process.waitUntilExit()
            }
        }
        self.kill()
    }

    /// SIGKILL, and wait until it is gone.
    public func kill() {
        self.process?.killAndWait()
        self.process = nil
    }

    deinit {
        self.kill()
    }
}
