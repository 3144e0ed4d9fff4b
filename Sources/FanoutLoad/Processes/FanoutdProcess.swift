public import FanoutClient
import FanoutKeys
import FanoutWire
import FanoutTestSupport
import Foundation
import NIOCore
import NIOPosix

/// A `fanoutd` the harness starts: on a data directory, on a loopback port the kernel picks, with
/// an admin and a consumer key it writes itself. It can be killed with SIGKILL and started again
/// on the same directory (the `recover` scenario).
public final class FanoutdProcess: @unchecked Sendable {
    // Safe to share: `port` and `process` change only in `start`, `kill` and `stop`, which the
    // harness calls in sequence from one task; `port` is read by that task after `start` returned.
    public let executable: String
    public let dataDirectory: String
    public let durability: String
    public let adminKey: String
    public let consumerKey: String
    /// The port of the running server.
    public private(set) var port = 0
    /// The port of its HTTP front, when started with one.
    public private(set) var httpPort: Int?
    private let http: Bool
    private var process: Process?
    /// The keys it accepts (a cluster's nodes share them).
    private let keys: APIKeyStore
    /// More options, as `--cluster` and its companions for a cluster node.
    public var extraArguments: [String] = []

    /// The `fanoutd` next to this program's own executable (they are built together).
    public static var siblingExecutable: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("fanoutd").path
    }

    /// What clients need to speak TLS to it, when it was started with TLS.
    public private(set) var clientTLS: FanoutClient.TLS?

    /// With `keysOf`, it accepts that server's keys (a node of the same cluster) instead of keys
    /// of its own.
    public init(
        executable: String = FanoutdProcess.siblingExecutable,
        dataDirectory: String,
        durability: String,
        tls: Bool = false,
        http: Bool = false,
        keysOf other: FanoutdProcess? = nil
    ) throws {
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw LoadError("no fanoutd at \(executable) (build it, or pass --fanoutd PATH)")
        }
        self.executable = executable
        self.dataDirectory = dataDirectory
        self.durability = durability
        self.http = http
        try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
        if let other {
            (self.adminKey, self.consumerKey, self.keys) = (other.adminKey, other.consumerKey, other.keys)
        } else {
            let admin = try APIKey.generate(name: "load-admin", role: .admin, projects: .all)
            let consumer = try APIKey.generate(name: "load-consumer", role: .consumer, projects: .all)
            (self.adminKey, self.consumerKey, self.keys) = (admin.secret, consumer.secret, APIKeyStore([admin.key, consumer.key]))
        }
        try APIKeyFile.write(self.keys, to: self.keyFile)
        if tls {
            let pair = try DevelopmentCertificate.generate()
            try SecretFile.write(pair.privateKeyPEM, to: self.tlsFiles.key)
            try SecretFile.write(pair.certificatePEM, to: self.tlsFiles.certificate)
            self.clientTLS = try FanoutClient.TLS.make(trustRootsFile: self.tlsFiles.certificate)
        }
    }

    private var keyFile: String { "\(self.dataDirectory)/load-api-keys" }
    private var tlsFiles: (certificate: String, key: String) { ("\(self.dataDirectory)/load-cert.pem", "\(self.dataDirectory)/load-key.pem") }
    private var readyFile: String { "\(self.dataDirectory)/load-ready" }

    /// The process id of the running server.
    public var pid: Int32? { self.process.map(\.processIdentifier) }

    /// Starts the server and returns once it has written its ready file (it listens then).
    /// - Returns: how long that took.
    @discardableResult
    public func start(timeout: Duration = .seconds(600)) async throws -> Duration {
        try? FileManager.default.removeItem(atPath: self.readyFile)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: self.executable)
        process.arguments = [
            "--data-dir", self.dataDirectory, "--listen", "127.0.0.1:0", "--durability", self.durability,
            "--api-keys", self.keyFile, "--ready-file", self.readyFile, "--log-level", "warning",
            "--snapshot-every", "0",
            // The harness measures the engine's rate, which FCM's send quotas would cap (600k a minute).
            "--project-messages-per-minute", "0", "--device-messages-per-minute", "0", "--device-messages-per-hour", "0",
        ] + (self.clientTLS == nil ? [] : ["--tls-cert", self.tlsFiles.certificate, "--tls-key", self.tlsFiles.key]) + self.extraArguments
        if self.http {
            let httpPort = try LoopbackPort.free()
            self.httpPort = httpPort
            process.arguments! += ["--http", "127.0.0.1:\(httpPort)"]
        }
        process.standardOutput = FileHandle.nullDevice
        let started = ContinuousClock.now
        try process.run()
        self.process = process
        // The ready file appears once the server listens; poll it (this is a harness, not a test).
        self.port = try await process.waitUntilReady("fanoutd", readiness: "listened", timeout: timeout, polling: .milliseconds(1)) {
            (try? String(contentsOfFile: self.readyFile, encoding: .utf8))
                .flatMap { $0.split(separator: ":").last.flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) } }
        }
        if let httpPort = self.httpPort {
            // The HTTP front starts with the service group, just after the ready file.
            _ = try await process.waitUntilReady("fanoutd's HTTP front", readiness: "listened", timeout: timeout, polling: .milliseconds(1)) {
                Self.accepts(port: httpPort) ? httpPort : nil
            }
        }
        return ContinuousClock.now - started
    }

    /// Whether something accepts connections on the loopback `port`. A connection whose own
    /// port the kernel picked as `port` is connected to itself (TCP's simultaneous open, which
    /// Linux allows on loopback), not to a listener: polled every millisecond while nothing
    /// listens yet, a port in the ephemeral range is now and then picked so.
    /// (`localPort` binds the probe's own end first, for tests: the same port connects to itself.)
    static func accepts(port: Int, localPort: Int? = nil) -> Bool {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        if let localPort {
            let bound = try? SocketAddress(ipAddress: "127.0.0.1", port: localPort).withSockAddr { bind(descriptor, $0, socklen_t($1)) }
            guard bound == 0 else { return false }
        }
        let connected = try? SocketAddress(ipAddress: "127.0.0.1", port: port).withSockAddr { address, size in
            connect(descriptor, address, socklen_t(size))
        }
        return connected == 0 && Self.localPort(of: descriptor).map { $0 != port } == true
    }

    /// The local port of a loopback socket, nil if it cannot be read.
    static func localPort(of descriptor: Int32) -> Int? {
        var local = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) == 0 }
        }
        return named ? Int(UInt16(bigEndian: local.sin_port)) : nil
    }

    /// SIGKILL, and wait until it is gone.
    public func kill() {
        self.process?.killAndWait()
        self.process = nil
    }

    /// SIGTERM (a graceful shutdown), and wait until it is gone.
    /// - Returns: the exit status.
    @discardableResult
    public func stop() -> Int32 {
        guard let process = self.process else { return 0 }
        if process.isRunning {
            process.terminate()
        }
        process.waitUntilExit()
        self.process = nil
        return process.terminationStatus
    }

    public var resources: ProcessResources? {
        self.pid.flatMap { ProcessResources.of(pid: $0) }
    }

    deinit {
        self.kill()
    }
}
