import ArgumentParser
import FanoutCore
import FanoutKeys
import Foundation

/// `fanout tls dev-cert DIR`: a self-signed pair for trying TLS out.
struct TLSCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tls",
        abstract: "TLS helpers.",
        subcommands: [DevCert.self]
    )

    struct DevCert: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "dev-cert",
            abstract: "Write a self-signed certificate and key for localhost (DIR/cert.pem, DIR/key.pem), for trying TLS out.",
            discussion: """
                A P-256 key and a certificate for localhost, 127.0.0.1 and ::1, valid for --days, made with \
                system libcrypto. It is its own CA: `fanoutd --tls-cert DIR/cert.pem --tls-key DIR/key.pem`, \
                then `fanout --tls-ca DIR/cert.pem ...`. key.pem is written 0600. Not for production. \
                Exit codes: 0 written, 1 a file exists (without --force) or cannot be written.
                """
        )

        @Argument(help: "The directory (created when missing).") var directory: String
        @Option(help: "Days of validity.") var days = 365
        @Flag(help: "Overwrite cert.pem and key.pem.") var force = false
        @Flag(help: "Print JSON.") var json = false

        func run() throws {
            guard (1...3650).contains(self.days) else { throw ValidationError("--days must be 1 to 3650") }
            let certificatePath = (self.directory as NSString).appendingPathComponent("cert.pem")
            let keyPath = (self.directory as NSString).appendingPathComponent("key.pem")
            do {
                try FileManager.default.createDirectory(atPath: self.directory, withIntermediateDirectories: true)
                for path in [certificatePath, keyPath] where !self.force && FileManager.default.fileExists(atPath: path) {
                    throw ValidationError("\(path) exists (--force overwrites it)")
                }
                let pair = try DevelopmentCertificate.generate(validFor: self.days * 86_400)
                try SecretFile.write(pair.privateKeyPEM, to: keyPath)
                try Data(pair.certificatePEM.utf8).write(to: URL(fileURLWithPath: certificatePath), options: .atomic)
            } catch {
                writeToStandardError("fanout tls dev-cert: \(error)\n")
                throw ExitCode(1)
            }
            if self.json {
                printJSON(.object(JSONObject([.init(key: "certificate", value: .string(certificatePath)), .init(key: "key", value: .string(keyPath))])))
            } else {
                print("wrote \(certificatePath) and \(keyPath) (localhost, 127.0.0.1, ::1; \(self.days) days)")
            }
        }
    }
}
