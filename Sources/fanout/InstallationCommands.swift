import ArgumentParser
import FanoutClient
import FanoutCore
import FanoutWire

struct RegisterCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "register",
        abstract: "Register an installation (the server assigns the FID unless a valid free one is offered), or import many from a file.",
        discussion: """
            --file imports registrations in batches of up to 1000 (REGISTER_BATCH, several in flight): \
            CSV with a header row naming its columns, or JSON lines (one object per line). Columns \
            and keys: token, fid, platform, appId, deviceName, deviceOs, deviceType, apnsToken; \
            --platform and --app-id are the defaults for lines without them. Each line is registered \
            on its own: refused lines are listed by line number (never their tokens). Exit codes: 0 \
            all registered (or already there), 1 some lines refused, 2 usage or connection error.
            """
    )
    @OptionGroup var server: ServerOptions
    @Option(help: "android, ios or web.") var platform: String?
    @Option(name: .customLong("app-id"), help: "The Firebase app id.") var appID: String?
    @Option(help: "The registration token.") var token: String?
    @Option(help: "The FID the app generated.") var fid: String?
    @Option(name: [.customLong("device-name"), .customLong("deviceName")], help: "The device's name.") var deviceName: String?
    @Option(name: [.customLong("device-os"), .customLong("deviceOs")], help: "The device's operating system.") var deviceOS: String?
    @Option(name: [.customLong("device-type"), .customLong("deviceType")], help: "The device's type (phone, tablet, ...).") var deviceType: String?
    @Option(name: .customLong("apns-token"), help: "The APNs device token, hex (iOS).") var apnsToken: String?
    @Option(help: "Import registrations from this CSV or JSON-lines file (- for standard input).") var file: String?
    @Option(help: "Batches in flight at once (with --file).") var window = 8
    @Flag(help: "Also issue the installation's credentials (a refresh token and an auth token, as Firebase Installations gives at registration) and print them.") var credentials = false

    func run() async throws {
        let platform = try self.platform.map { (name: String) throws -> Platform in
            guard let platform = Platform(rawValue: name) else { throw ValidationError("--platform must be android, ios or web") }
            return platform
        }
        if let file = self.file {
            guard self.token == nil, self.fid == nil, self.deviceName == nil, self.deviceOS == nil, self.deviceType == nil, self.apnsToken == nil else {
                throw ValidationError("--file takes the registrations from the file: only --platform and --app-id apply to it")
            }
            guard let lines = LineReader(path: file) else { throw ValidationError("cannot open \(file)") }
            try await importRegistrations(
                RegistrationFile(lines: lines, platform: platform, appID: self.appID),
                window: self.window,
                server: self.server
            )
            return
        }
        guard let platform else { throw ValidationError("--platform is required (android, ios or web)") }
        guard let appID = self.appID else { throw ValidationError("--app-id is required") }
        let fields = RegistrationFields(
            offeredFID: self.fid,
            token: self.token,
            platform: platform,
            appID: appID,
            deviceName: self.deviceName,
            deviceOS: self.deviceOS,
            deviceType: self.deviceType,
            apnsToken: self.apnsToken
        )
        let (result, credentials) = try await self.server.withClient(command: "register") { (client: FanoutClient) -> (RegistrationResult, InstallationCredentials?) in
            guard self.credentials else { return (try await client.register(fields, in: self.server.project), nil) }
            let registered = try await client.registerWithCredentials(fields, in: self.server.project)
            return (registered.result, registered.credentials)
        }
        if result.isExisting { writeToStandardError("already registered with these details: nothing changed\n") }
        self.server.print(result.installation)
        if let credentials { AuthCommand.show(credentials, json: self.server.json) }
    }
}

struct RefreshCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "refresh", abstract: "Rotate an installation's registration token.")
    @OptionGroup var server: ServerOptions
    @Argument(help: "The installation: FID or current token.") var registration: String
    @Argument(help: "The new token.") var token: String

    func run() async throws {
        let installation = try await self.server.withClient(command: "refresh") {
            try await $0.refreshToken(self.registration, to: self.token, in: self.server.project)
        }
        self.server.print(installation)
    }
}

struct DeleteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "delete", abstract: "Delete an installation (its token, topics, mailbox).")
    @OptionGroup var server: ServerOptions
    @Argument(help: "The FID.") var fid: String

    func run() async throws {
        let installation = try await self.server.withClient(command: "delete") { try await $0.deleteInstallation(fid: self.fid, in: self.server.project) }
        self.server.print(installation)
    }
}

struct InstallationCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "installation", abstract: "Show an installation and its topics.")
    @OptionGroup var server: ServerOptions
    @Argument(help: "FID or token.") var registration: String

    func run() async throws {
        let (installation, topics) = try await self.server.withClient(command: "installation") { client in
            (try await client.installation(self.registration, in: self.server.project), try await client.topics(of: self.registration, in: self.server.project))
        }
        if self.server.json {
            guard case .object(var object) = installation.json else { return }
            object.members.append(.init(key: "topics", value: .array(topics.map(JSONValue.string))))
            printJSON(.object(object))
        } else {
            print(installation.line)
            print("topics: \(topics.joined(separator: " "))")
        }
    }
}

struct UserCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "user",
        abstract: "Bind devices to users, sign out, link anonymous users, list users and a user's devices, clean up anonymous users.",
        subcommands: [Bind.self, SignOut.self, Link.self, Devices.self, List.self, CleanUp.self, AutoCleanUp.self]
    )

    struct Bind: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Bind an installation to a user.")
        @OptionGroup var server: ServerOptions
        @Argument(help: "FID or token.") var registration: String
        @Argument(help: "The user id.") var user: String
        @Flag(help: "The user is anonymous.") var anonymous = false

        func run() async throws {
            let installation = try await self.server.withClient(command: "user bind") {
                try await $0.bindDevice(self.registration, to: self.user, anonymous: self.anonymous, in: self.server.project)
            }
            self.server.print(installation)
        }
    }

    struct SignOut: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "signout", abstract: "Sign a user out of a device (drops its token).")
        @OptionGroup var server: ServerOptions
        @Argument(help: "The user id.") var user: String
        @Argument(help: "FID or token.") var registration: String

        func run() async throws {
            let installation = try await self.server.withClient(command: "user signout") {
                try await $0.signOut(self.user, on: self.registration, in: self.server.project)
            }
            self.server.print(installation)
        }
    }

    struct Link: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Link an anonymous user to a permanent one.")
        @OptionGroup var server: ServerOptions
        @Argument(help: "The anonymous user.") var anonymous: String
        @Argument(help: "The permanent user.") var permanent: String

        func run() async throws {
            let user = try await self.server.withClient(command: "user link") {
                try await $0.linkUser(anonymous: self.anonymous, to: self.permanent, in: self.server.project)
            }
            self.server.print(user)
        }
    }

    struct CleanUp: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "cleanup",
            abstract: "Remove anonymous users created more than 30 days ago (their devices stay, unbound).",
            discussion: """
                Firebase Auth's rule: 30 days (fanoutd --anonymous-user-lifetime) after the user \
                was created, counted for users older than the project's automatic clean-up from \
                when it was turned on (user auto-cleanup). Prints the users removed, or with \
                --dry-run those that would be.
                """
        )
        @OptionGroup var server: ServerOptions
        @Flag(name: .customLong("dry-run"), help: "List who would be removed; remove no one.") var dryRun = false

        func run() async throws {
            let users = try await self.server.withClient(command: "user cleanup") {
                try await $0.cleanUpAnonymousUsers(in: self.server.project, dryRun: self.dryRun)
            }
            self.server.print(names: users)
        }
    }

    struct AutoCleanUp: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "auto-cleanup",
            abstract: "Turn the project's automatic anonymous clean-up on or off (off by default).",
            discussion: "While on, fanoutd removes anonymous users as `user cleanup` does, at start and then hourly."
        )
        @OptionGroup var server: ServerOptions
        @Argument(help: "on or off.") var state: String

        func run() async throws {
            guard self.state == "on" || self.state == "off" else { throw ValidationError("give on or off") }
            let since = try await self.server.withClient(command: "user auto-cleanup") {
                try await $0.setAnonymousCleanUp(self.state == "on", in: self.server.project)
            }
            if self.server.json {
                printJSON(.object(JSONObject([.init(key: "enabledSince", value: since.map { .string($0.iso8601) } ?? .null)])))
            } else {
                print(since.map { "automatic anonymous clean-up on since \($0.iso8601)" } ?? "automatic anonymous clean-up off")
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "The project's users, in id order.")
        @OptionGroup var server: ServerOptions
        @Option(help: "Start after this user id.") var after = ""
        @Option(help: "At most this many (1-1000).") var limit = 1000

        func run() async throws {
            let users = try await self.server.withClient(command: "user list") {
                try await $0.users(after: self.after, limit: self.limit, in: self.server.project)
            }
            for user in users {
                if self.server.json {
                    printJSON(.object(JSONObject([
                        .init(key: "user", value: .string(user.id)),
                        .init(key: "anonymous", value: .bool(user.isAnonymous)),
                        .init(key: "createdAt", value: .string(user.createdAt.iso8601)),
                        .init(key: "lastActive", value: .string(user.lastActive.iso8601)),
                        .init(key: "devices", value: jsonNumber(user.devices)),
                    ])))
                } else {
                    let kind = user.isAnonymous ? " (anonymous)" : ""
                    print("\(user.id)\(kind) devices=\(user.devices) created=\(user.createdAt.iso8601) last-active=\(user.lastActive.iso8601)")
                }
            }
        }
    }

    struct Devices: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "A user's devices.")
        @OptionGroup var server: ServerOptions
        @Argument(help: "The user id.") var user: String

        func run() async throws {
            let user = try await self.server.withClient(command: "user devices") { try await $0.user(self.user, in: self.server.project) }
            self.server.print(user)
        }
    }
}

struct StatsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "stats", abstract: "A project's installation count and delivery counters, the log's and the server's connections'.")
    @OptionGroup var server: ServerOptions

    func run() async throws {
        let stats = try await self.server.withClient(command: "stats") { try await $0.statistics(in: self.server.project) }
        let d = stats.deliveries
        let fields: [(String, Int)] = [
            ("installations", Int(stats.installations)), ("sends", d.sends), ("enqueued", d.enqueued),
            ("delivered", d.delivered), ("acknowledged", d.acknowledged), ("expired", d.expired),
            ("collapsed", d.collapsed), ("dropped", d.dropped), ("rejected", d.rejected), ("skipped", d.skipped),
            ("pending", d.pending), ("messages", d.messages), ("consumers", d.consumers),
            ("logRecords", stats.log.records), ("logBatches", stats.log.batches), ("logSyncs", stats.log.syncs),
            ("logBytes", stats.log.bytes),
            ("connectionsAccepted", Int(stats.connections.accepted)), ("connectionsRefused", Int(stats.connections.refusedOverPendingLimit)),
            ("handshakeTimeouts", Int(stats.connections.handshakeTimeouts)), ("authenticationFailures", Int(stats.connections.authenticationFailures)),
            ("delayedAuthentications", Int(stats.connections.delayedAuthentications)),
        ]
        if self.server.json {
            printJSON(.object(JSONObject(fields.map { .init(key: $0.0, value: jsonNumber($0.1)) })))
        } else {
            for (name, value) in fields { print("\(name): \(value)") }
        }
    }
}
