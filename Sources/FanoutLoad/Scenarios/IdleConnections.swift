import FanoutClient
import FanoutCore
import FanoutWire
import Foundation

/// The `connections` scenario: many authenticated connections held open and idle at once, the
/// server's resident memory per connection, and how promptly a fresh connection is answered
/// while they are held.
enum IdleConnections {
    /// Opens `count` connections (HELLO answered on each), `concurrency` connects at a time; then
    /// measures a fresh connection's connect and HELLO, and its PING round trips; closes them all.
    /// With `devices`, each connection is a device: `count` installations are registered and given
    /// credentials first (not measured), and each connects with its own auth token.
    static func hold(
        _ count: Int,
        concurrency: Int,
        host: String,
        port: Int,
        apiKey: String,
        tls: FanoutClient.TLS? = nil,
        devices: Bool = false,
        serverResources: @Sendable () -> ProcessResources?
    ) async throws -> ConnectionFigures {
        try raiseOpenFileLimit(to: count + 1024)
        let credentials: [Hello.Credential] = devices
            ? try await Self.deviceCredentials(count, host: host, port: port, apiKey: apiKey, tls: tls)
            : Array(repeating: .apiKey(Array(apiKey.utf8)), count: count)
        let role: Hello.Role = devices ? .device : .consumer
        let before = serverResources()
        var clients: [FanoutClient] = []
        clients.reserveCapacity(count)
        var next = 0
        while next < count {
            let wave = min(concurrency, count - next)
            let opened = try await withThrowingTaskGroup(of: FanoutClient.self) { group in
                for index in next..<(next + wave) {
                    let credential = credentials[index]
                    group.addTask { try await FanoutClient.connect(host: host, port: port, credential: credential, role: role, tls: tls, clientName: "fanout-load idle") }
                }
                var opened: [FanoutClient] = []
                for try await client in group { opened.append(client) }
                return opened
            }
            clients += opened
            next += wave
        }
        let after = serverResources()

        let start = ContinuousClock.now
        let fresh = try await FanoutClient.connect(host: host, port: port, apiKey: apiKey, role: .consumer, tls: tls, clientName: "fanout-load fresh")
        let connected = ContinuousClock.now - start
        var pings: [Duration] = []
        for _ in 0..<200 {
            let sent = ContinuousClock.now
            try await fresh.ping()
            pings.append(ContinuousClock.now - sent)
        }
        try? await fresh.close()
        for client in clients { try? await client.close() }
        clients = []
        pings.sort()
        func milliseconds(_ duration: Duration) -> Double { duration / .milliseconds(1) }
        let beforeBytes = before?.residentBytes ?? 0
        let afterBytes = after?.residentBytes ?? 0
        return ConnectionFigures(
            connections: count,
            residentBytesBefore: beforeBytes,
            residentBytesAfter: afterBytes,
            bytesPerConnection: Double(afterBytes - beforeBytes) / Double(max(count, 1)),
            freshConnectMilliseconds: milliseconds(connected),
            freshPingP50Milliseconds: milliseconds(pings[pings.count / 2]),
            freshPingP99Milliseconds: milliseconds(pings[pings.count * 99 / 100])
        )
    }

    /// Registers `count` installations and issues each its credentials; returns their auth tokens.
    static func deviceCredentials(_ count: Int, host: String, port: Int, apiKey: String, tls: FanoutClient.TLS?) async throws -> [Hello.Credential] {
        let admin = try await FanoutClient.connect(host: host, port: port, apiKey: apiKey, tls: tls, clientName: "fanout-load devices")
        defer { Task { try? await admin.close() } }
        var fids: [String] = []
        for first in stride(from: 0, to: count, by: 1000) {
            let batch = (first..<min(first + 1000, count)).map { RegistrationFields(token: "idle-device-\($0)", platform: .android, appID: "1:1:android:a") }
            for outcome in try await admin.register(batch) {
                guard case .registered(let result) = outcome else { throw LoadError("registering an idle device failed: \(outcome)") }
                fids.append(result.installation.fid.description)
            }
        }
        var credentials: [Hello.Credential] = []
        for first in stride(from: 0, to: fids.count, by: 64) {
            let wave = fids[first..<min(first + 64, fids.count)]
            credentials += try await withThrowingTaskGroup(of: (Int, Hello.Credential).self) { group in
                for (offset, fid) in wave.enumerated() {
                    group.addTask { (offset, .installationAuthToken(Array(try await admin.issueCredentials(for: fid).authToken.token.utf8))) }
                }
                var issued: [(Int, Hello.Credential)] = []
                for try await pair in group { issued.append(pair) }
                return issued.sorted { $0.0 < $1.0 }.map(\.1)
            }
        }
        return credentials
    }

    /// Raises this process's soft limit on open files (a child it starts inherits it).
    static func raiseOpenFileLimit(to wanted: Int) throws {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
        guard limit.rlim_cur < rlim_t(wanted) else { return }
        guard limit.rlim_max >= rlim_t(wanted) else {
            throw LoadError("\(wanted) open files are needed and the hard limit is \(limit.rlim_max) (ulimit -Hn)")
        }
        limit.rlim_cur = rlim_t(wanted)
        setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
    }
}

/// What the `connections` scenario measured.
public struct ConnectionFigures: Codable, Sendable {
    public var connections: Int
    /// The server's resident memory before the connections were opened and while they were held.
    public var residentBytesBefore: Int
    public var residentBytesAfter: Int
    public var bytesPerConnection: Double
    /// A fresh connection while they are held: connect and HELLO, then PING round trips.
    public var freshConnectMilliseconds: Double
    public var freshPingP50Milliseconds: Double
    public var freshPingP99Milliseconds: Double
}
