import ArgumentParser
import FanoutClient
import FanoutCore
import FanoutKeys
import FanoutWire
import Foundation

/// How the networked subcommands reach `fanoutd`, and how they print.
struct ServerOptions: ParsableArguments {
    @Option(help: "host:port of fanoutd (default: $FANOUT_SERVER, else 127.0.0.1:7400).")
    var server: String?

    @Option(name: .customLong("api-key"), help: "The API key (default: $FANOUT_API_KEY, else the key in ./fanout-data/admin-key that fanoutd's first start leaves there).")
    var apiKey: String?

    @Option(help: "Connect in this role: admin, sender, consumer or app (default: $FANOUT_ROLE, else what the command needs: consumer for tail, admin otherwise). A sender key connects as sender.")
    var role: String?

    @Option(name: .customLong("auth-token"), help: "Act as a device: the installation auth token from `fanout auth issue` (default: $FANOUT_AUTH_TOKEN). The device may act only on its own installation.")
    var authToken: String?

    @Option(name: .customLong("refresh-token"), help: "Act as a device by its refresh token, which only gets a new auth token (`fanout auth token`) or deletes the installation (default: $FANOUT_REFRESH_TOKEN).")
    var refreshToken: String?

    @Flag(help: "Speak TLS to fanoutd (default: $FANOUT_TLS=1; implied by --tls-ca). Without --tls-ca, the system's trust roots.")
    var tls = false

    @Option(name: .customLong("tls-ca"), help: "TLS: trust the CA certificates of this PEM file (default: $FANOUT_TLS_CA).")
    var tlsCA: String?

    @Option(name: .customLong("tls-server-name"), help: "TLS: the name the server's certificate must carry (default: the --server host).")
    var tlsServerName: String?

    @Option(name: .customLong("tls-cert"), help: "TLS: a client certificate, PEM, for a server that requires one (default: $FANOUT_TLS_CERT).")
    var tlsCertificate: String?

    @Option(name: .customLong("tls-key"), help: "TLS: the client certificate's private key, PEM (default: $FANOUT_TLS_KEY).")
    var tlsKey: String?

    @Option(help: "The project.")
    var project = ProjectID.default.value

    @Flag(help: "Print JSON, one object per line, for programs.")
    var json = false

    /// Connects, runs `body`, closes. Server errors exit 1, connection and usage errors exit 2.
    func withClient<T>(command: String, role: Hello.Role = .admin, _ body: (FanoutClient) async throws -> T) async throws -> T {
        let address = self.server ?? ProcessInfo.processInfo.environment["FANOUT_SERVER"] ?? "127.0.0.1:7400"
        guard let endpoint = HostAndPort(address) else {
            writeToStandardError("fanout \(command): --server must be host:port\n")
            throw ExitCode(2)
        }
        let environment = ProcessInfo.processInfo.environment
        let credential: Hello.Credential
        var role = role
        if let token = self.authToken ?? environment["FANOUT_AUTH_TOKEN"] {
            (credential, role) = (.installationAuthToken(Array(token.utf8)), .device)
        } else if let token = self.refreshToken ?? environment["FANOUT_REFRESH_TOKEN"] {
            (credential, role) = (.installationRefreshToken(Array(token.utf8)), .device)
        } else if let key = self.apiKey ?? environment["FANOUT_API_KEY"] ?? Self.keyFromDataDirectory() {
            credential = .apiKey(Array(key.utf8))
        } else {
            writeToStandardError("fanout \(command): no API key: pass --api-key or set FANOUT_API_KEY\n")
            throw ExitCode(2)
        }
        let roleName = role == .device ? nil : self.role ?? environment["FANOUT_ROLE"]
        guard let role = roleName.map({ name in APIKey.keyRoles.first { "\($0)" == name } }) ?? role else {
            writeToStandardError("fanout \(command): --role must be admin, sender, consumer or app\n")
            throw ExitCode(2)
        }
        let tls: FanoutClient.TLS?
        do {
            tls = try self.clientTLS()
        } catch {
            writeToStandardError("fanout \(command): cannot load the TLS files: \(error)\n")
            throw ExitCode(2)
        }
        let client: FanoutClient
        do {
            client = try await FanoutClient.connect(host: endpoint.host, port: endpoint.port, credential: credential, role: role, tls: tls, clientName: "fanout \(command)")
        } catch let error as FanoutError {
            // A refused key or role is the server's answer (1); anything else, the connection (2).
            self.report(error, command: command)
            throw ExitCode(error.code == .unauthenticated || error.code == .permissionDenied ? 1 : 2)
        } catch {
            writeToStandardError("fanout \(command): cannot connect to \(address): \(error)\n")
            throw ExitCode(2)
        }
        do {
            let result = try await body(client)
            try? await client.close()
            return result
        } catch let error as FanoutError {
            try? await client.close()
            self.report(error, command: command)
            throw ExitCode(error.code == .unavailable ? 2 : 1)
        } catch {
            try? await client.close()
            if error is ExitCode { throw error }
            writeToStandardError("fanout \(command): \(error)\n")
            throw ExitCode(2)
        }
    }

    /// The TLS the options and environment ask for; nil for plain TCP.
    func clientTLS() throws -> FanoutClient.TLS? {
        let environment = ProcessInfo.processInfo.environment
        let ca = self.tlsCA ?? environment["FANOUT_TLS_CA"]
        let certificate = self.tlsCertificate ?? environment["FANOUT_TLS_CERT"]
        let key = self.tlsKey ?? environment["FANOUT_TLS_KEY"]
        guard self.tls || environment["FANOUT_TLS"] == "1" || ca != nil || certificate != nil else { return nil }
        guard (certificate == nil) == (key == nil) else {
            throw ValidationError("--tls-cert and --tls-key go together")
        }
        return try FanoutClient.TLS.make(trustRootsFile: ca, serverHostname: self.tlsServerName, clientCertificateFile: certificate, clientKeyFile: key)
    }

    /// A server error: FCM's error object with --json, a line otherwise.
    func report(_ error: FanoutError, command: String) {
        if self.json {
            printJSON(error.json)
        } else {
            writeToStandardError("fanout \(command): \(error)\n")
            for violation in error.violations {
                writeToStandardError("  \(violation.field): \(violation.description)\n")
            }
        }
    }

    /// The admin key fanoutd's first start leaves in ./fanout-data/admin-key (where `make run` keeps it).
    private static func keyFromDataDirectory() -> String? {
        guard let text = try? String(contentsOfFile: "./fanout-data/admin-key", encoding: .utf8) else { return nil }
        let key = text.trimmingCharacters(in: .whitespacesAndNewlines)
        return key.isEmpty ? nil : key
    }
}

// MARK: - Output

func printJSON(_ value: JSONValue) {
    print(String(decoding: JSONWriter.encode(value), as: UTF8.self))
}

func jsonNumber(_ value: Int) -> JSONValue { .number(JSONNumber(value)) }

/// `projects/{project}/messages/{number}` of a delivery's message, or `deleted-messages` for the marker.
func messageName(of id: DeliveryID, in project: String) -> String {
    id.messageNumber.map { "projects/\(project)/messages/\($0)" } ?? "deleted-messages"
}

/// An offline check's result: with `json`, `{"valid":true,KEY:VALUE}` or FCM's error object on
/// stdout; otherwise `line` on stdout, or the error on stderr. Invalid input exits 1.
func printCheck(json: Bool, key: String, value: String, line: String, error message: String?, field: String) throws {
    if let message {
        if json {
            printJSON(FanoutError(.invalidArgument, message, field: field).json)
            throw ExitCode(1)
        }
        throw invalid(message)
    }
    if json {
        printJSON(.object(JSONObject([.init(key: "valid", value: .bool(true)), .init(key: key, value: .string(value))])))
    } else {
        print(line)
    }
}

extension Installation {
    /// Tokens appear only in JSON output (for programs), never in the human form.
    var json: JSONValue {
        var members: [JSONObject.Member] = [
            .init(key: "fid", value: .string(self.fid.string)),
            .init(key: "platform", value: .string(self.platform.rawValue)),
            .init(key: "appId", value: .string(self.appID.value)),
            .init(key: "slot", value: jsonNumber(Int(self.slot))),
            .init(key: "createdAt", value: jsonNumber(Int(self.createdAt.millisecondsSinceEpoch))),
            .init(key: "lastSeen", value: jsonNumber(Int(self.lastSeen.millisecondsSinceEpoch))),
        ]
        if let token = self.token { members.append(.init(key: "token", value: .string(token.value))) }
        if let user = self.user { members.append(.init(key: "user", value: .string(user.value))) }
        if let name = self.device.name { members.append(.init(key: "deviceName", value: .string(name))) }
        if let os = self.device.os { members.append(.init(key: "deviceOs", value: .string(os))) }
        if let type = self.device.type { members.append(.init(key: "deviceType", value: .string(type))) }
        if let apnsToken = self.apnsToken { members.append(.init(key: "apnsToken", value: .string(apnsToken.hex))) }
        return .object(JSONObject(members))
    }

    /// FID, platform, app, the tokens' sizes (never their values), device details, user, times in ISO 8601.
    var line: String {
        let token = self.token.map { "token=<\($0.value.utf8.count) bytes>" } ?? "no-token"
        let apns = self.apnsToken.map { " apns-token=<\($0.hex.utf8.count / 2) bytes>" } ?? ""
        let device = [("device-name", self.device.name), ("device-os", self.device.os), ("device-type", self.device.type)]
            .compactMap { name, value in value.map { " \(name)=\($0)" } }.joined()
        let user = self.user.map { " user=\($0.value)" } ?? ""
        return "\(self.fid) \(self.platform) app=\(self.appID) \(token)\(apns)\(device)\(user) created=\(self.createdAt.iso8601) last-seen=\(self.lastSeen.iso8601)"
    }
}

extension ServerOptions {
    func print(_ installation: Installation) {
        if self.json { printJSON(installation.json) } else { Swift.print(installation.line) }
    }

    func print(_ user: User) {
        if self.json {
            printJSON(.object(JSONObject([
                .init(key: "user", value: .string(user.id.value)),
                .init(key: "anonymous", value: .bool(user.isAnonymous)),
                .init(key: "devices", value: .array(user.devices.map(\.json))),
            ])))
        } else {
            Swift.print("\(user.id)\(user.isAnonymous ? " (anonymous)" : "") \(user.devices.count) device(s)")
            for device in user.devices { Swift.print("  " + device.line) }
        }
    }

    func print(names: [String]) {
        if self.json { printJSON(.array(names.map(JSONValue.string))) } else { names.forEach { Swift.print($0) } }
    }
}
