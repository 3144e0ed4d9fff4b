import ArgumentParser
import FanoutClient
import FanoutCore

/// `fanout apns`: FCM's APNs token mapping on Apple platforms.
struct APNsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns",
        abstract: "Set, clear and look up the APNs device tokens of iOS installations.",
        discussion: """
            An APNs device token (hex, an even number of 16 to 200 digits) belongs to at most one \
            installation of a project: setting one another installation holds moves it, as FCM's \
            mapping does. Exit codes: 0 done, 1 refused or not found, 2 usage or connection error.
            """,
        subcommands: [Set.self, Clear.self, Lookup.self]
    )

    struct Set: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "set", abstract: "Give an iOS installation its APNs device token.")
        @OptionGroup var server: ServerOptions
        @Argument(help: "The installation: FID or registration token.") var registration: String
        @Argument(help: "The APNs device token, hex.") var apnsToken: String

        func run() async throws {
            let installation = try await self.server.withClient(command: "apns set") {
                try await $0.setAPNsToken(self.apnsToken, of: self.registration, in: self.server.project)
            }
            self.server.print(installation)
        }
    }

    struct Clear: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "clear", abstract: "Remove an installation's APNs device token.")
        @OptionGroup var server: ServerOptions
        @Argument(help: "The installation: FID or registration token.") var registration: String

        func run() async throws {
            let installation = try await self.server.withClient(command: "apns clear") {
                try await $0.setAPNsToken(nil, of: self.registration, in: self.server.project)
            }
            self.server.print(installation)
        }
    }

    struct Lookup: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "lookup", abstract: "The installation an APNs device token belongs to.")
        @OptionGroup var server: ServerOptions
        @Argument(help: "The APNs device token, hex.") var apnsToken: String

        func run() async throws {
            let installation = try await self.server.withClient(command: "apns lookup") {
                try await $0.installation(forAPNsToken: self.apnsToken, in: self.server.project)
            }
            self.server.print(installation)
        }
    }
}
