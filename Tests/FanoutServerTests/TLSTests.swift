import FanoutClient
import FanoutCore
import FanoutKeys
import FanoutServer
import FanoutTestSupport
import FanoutWire
import Foundation
import NIOSSL
import Testing

/// TLS on real sockets (docs/security.md): the handshake, a wrong CA, an expired certificate,
/// mutual TLS with and without a client certificate, and a TLS client that is not ours.
@Suite("Server: TLS")
struct TLSTests {
    /// A certificate and key written as PEM files into `directory`.
    struct Pair {
        let certificate: String
        let key: String

        init(_ name: String, in directory: String, validFrom: Int = -60, validFor: Int = 86_400) throws {
            let pair = try DevelopmentCertificate.generate(commonName: name, validFrom: validFrom, validFor: validFor)
            self.certificate = directory + "/\(name)-cert.pem"
            self.key = directory + "/\(name)-key.pem"
            try SecretFile.write(pair.privateKeyPEM, to: self.key)
            try Data(pair.certificatePEM.utf8).write(to: URL(fileURLWithPath: self.certificate))
        }
    }

    static func serving<T>(_ server: Pair, clientCA: String? = nil, in directory: String, _ body: (Int) async throws -> T) async throws -> T {
        var configuration = LoopbackServer.configuration
        configuration.tls = try ServerConfiguration.tls(certificate: server.certificate, privateKey: server.key, clientCA: clientCA)
        return try await LoopbackServer.withServer(directory: directory + "/data", configuration: configuration) { server, _ in
            try await body(server.localPort)
        }
    }

    static func connect(_ port: Int, trusting ca: String, client: Pair? = nil) async throws -> FanoutClient {
        let tls = try FanoutClient.TLS.make(trustRootsFile: ca, clientCertificateFile: client?.certificate, clientKeyFile: client?.key)
        return try await FanoutClient.connect(host: "127.0.0.1", port: port, apiKey: LoopbackServer.adminKey, tls: tls)
    }

    @Test func aClientThatTrustsTheCertificateTalksOverTLS() async throws {
        try await TemporaryDirectory.with { directory in
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let server = try Pair("server", in: directory)
            try await Self.serving(server, in: directory) { port in
                let client = try await Self.connect(port, trusting: server.certificate)
                try await client.createProject("shop-app")
                #expect(try await client.listProjects() == ["default", "shop-app"])
                try await client.close()

                // Plain TCP to a TLS port gets no WELCOME.
                await #expect(throws: (any Error).self) { _ = try await LoopbackServer.connect(port) }
            }
        }
    }

    @Test func aCertificateFromAnotherCAIsRefusedByTheClient() async throws {
        try await TemporaryDirectory.with { directory in
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let server = try Pair("server", in: directory)
            let other = try Pair("other", in: directory)
            try await Self.serving(server, in: directory) { port in
                await Self.expectVerificationFailure { _ = try await Self.connect(port, trusting: other.certificate) }
                // The server survives it.
                try await Self.connect(port, trusting: server.certificate).close()
            }
        }
    }

    @Test func anExpiredCertificateIsRefused() async throws {
        try await TemporaryDirectory.with { directory in
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let expired = try Pair("expired", in: directory, validFrom: -2 * 86_400, validFor: 86_400)
            try await Self.serving(expired, in: directory) { port in
                await Self.expectVerificationFailure { _ = try await Self.connect(port, trusting: expired.certificate) }
            }
        }
    }

    @Test func mutualTLSNeedsAClientCertificateFromTheClientCA() async throws {
        try await TemporaryDirectory.with { directory in
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let server = try Pair("server", in: directory)
            let worker = try Pair("worker", in: directory)
            let stranger = try Pair("stranger", in: directory)
            _ = try await Self.serving(server, clientCA: worker.certificate, in: directory) { port in
                let client = try await Self.connect(port, trusting: server.certificate, client: worker)
                #expect(try await client.listProjects() == ["default"])
                try await client.close()
                // Without a certificate, or with one the client CA did not sign: no connection.
                // (In TLS 1.3 the client learns it at its first read, so the HELLO fails.)
                await #expect(throws: (any Error).self) { _ = try await Self.connect(port, trusting: server.certificate) }
                await #expect(throws: (any Error).self) { _ = try await Self.connect(port, trusting: server.certificate, client: stranger) }
            }
        }
    }

    /// `openssl s_client`, a TLS client that is not ours: TLS 1.3 and 1.2 handshakes verify
    /// against the certificate, and TLS 1.1 is refused.
    @Test func opensslSClientHandshakes() async throws {
        try await TemporaryDirectory.with { directory in
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let server = try Pair("server", in: directory)
            try await Self.serving(server, in: directory) { port in
                for version in ["-tls1_3", "-tls1_2"] {
                    let output = try Self.sClient(port: port, ca: server.certificate, version)
                    #expect(output.status == 0, "\(version): \(output.text)")
                    #expect(output.text.contains("Verification: OK"), "\(version): \(output.text)")
                    #expect(output.text.contains(version == "-tls1_3" ? "TLSv1.3" : "TLSv1.2"))
                }
                let old = try Self.sClient(port: port, ca: server.certificate, "-tls1_1")
                #expect(old.status != 0 || !old.text.contains("Verification: OK"), "TLS 1.1 is refused: \(old.text)")
            }
        }
    }

    /// The client refuses the server's certificate: the connect fails, saying why.
    static func expectVerificationFailure(_ body: () async throws -> Void) async {
        do {
            try await body()
            Issue.record("the connection was made")
        } catch {
            #expect("\(error)".contains("CERTIFICATE_VERIFY_FAILED"), "\(error)")
        }
    }

    static func sClient(port: Int, ca: String, _ version: String) throws -> (status: Int32, text: String) {
        let outcome = try ChildProcess.run("openssl", ["s_client", "-connect", "127.0.0.1:\(port)", "-CAfile", ca, "-verify_return_error", "-brief", version])
        #expect(!outcome.timedOut, "openssl s_client \(version) ran past its time")
        return (outcome.status, outcome.output + outcome.error)
    }
}
