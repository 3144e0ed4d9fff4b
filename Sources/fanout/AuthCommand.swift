import ArgumentParser
import FanoutClient
import FanoutCore
import FanoutWire

/// `fanout auth`: installation credentials and the keys that sign them.
struct AuthCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "auth",
        abstract: "Installation credentials: issue them, get a new auth token, publish and rotate the signing keys.",
        discussion: """
            As Firebase Installations: an installation gets a refresh token (kept by the server as a \
            hash) and short-lived auth tokens, ES256 JWTs a backend can verify with the JWK Set. A \
            device connects with `--auth-token` and may act only on its own installation. Exit \
            codes: 0 done, 1 refused or not found, 2 usage or connection error.
            """,
        subcommands: [Issue.self, Token.self, JWKS.self, Rotate.self]
    )

    static func json(_ token: AuthToken) -> [JSONObject.Member] {
        [
            .init(key: "authToken", value: .string(token.token)),
            .init(key: "expiresAt", value: .string(token.expiresAt.iso8601)),
        ]
    }

    /// Credentials as `auth issue` and `register --credentials` print them.
    static func show(_ credentials: InstallationCredentials, json: Bool) {
        if json {
            printJSON(.object(JSONObject([
                .init(key: "fid", value: .string(credentials.fid)),
                .init(key: "refreshToken", value: .string(credentials.refreshToken)),
            ] + AuthCommand.json(credentials.authToken))))
        } else {
            Swift.print("fid:           \(credentials.fid)")
            Swift.print("refresh token: \(credentials.refreshToken)")
            Swift.print("auth token:    \(credentials.authToken.token)")
            Swift.print("expires:       \(credentials.authToken.expiresAt.iso8601)")
        }
    }

    struct Issue: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "issue",
            abstract: "Give an installation new credentials and print them (the refresh token only now). Its old credentials stop working."
        )
        @OptionGroup var server: ServerOptions
        @Argument(help: "The installation: FID or registration token.") var registration: String

        func run() async throws {
            let credentials = try await self.server.withClient(command: "auth issue") {
                try await $0.issueCredentials(for: self.registration, in: self.server.project)
            }
            AuthCommand.show(credentials, json: self.server.json)
        }
    }

    struct Token: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "token",
            abstract: "A new auth token for an installation: as the device with --refresh-token, or with an admin key."
        )
        @OptionGroup var server: ServerOptions
        @Argument(help: "The installation's FID.") var fid: String

        func run() async throws {
            let token = try await self.server.withClient(command: "auth token") { try await $0.generateAuthToken(for: self.fid, in: self.server.project) }
            if self.server.json {
                printJSON(.object(JSONObject(AuthCommand.json(token))))
            } else {
                Swift.print(token.token)
            }
        }
    }

    struct JWKS: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "jwks", abstract: "Print the public keys that verify auth tokens, as a JWK Set (JSON).")
        @OptionGroup var server: ServerOptions

        func run() async throws {
            Swift.print(try await self.server.withClient(command: "auth jwks") { try await $0.jwks() })
        }
    }

    struct Rotate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rotate",
            abstract: "Make a new signing key current (a key for all projects). Tokens the old key signed stay valid until they expire."
        )
        @OptionGroup var server: ServerOptions

        func run() async throws {
            let id = try await self.server.withClient(command: "auth rotate") { try await $0.rotateSigningKey() }
            if self.server.json {
                printJSON(.object(JSONObject([.init(key: "kid", value: .string(id))])))
            } else {
                Swift.print("the signing key is now \(id)")
            }
        }
    }
}
