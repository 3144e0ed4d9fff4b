import ArgumentParser
import FanoutClient
import FanoutCore
import FanoutWire

struct TouchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "touch", abstract: "Record that an installation was seen now.")
    @OptionGroup var server: ServerOptions
    @Argument(help: "FID or token.") var registration: String

    func run() async throws {
        let installation = try await self.server.withClient(command: "touch") { try await $0.touch(self.registration, in: self.server.project) }
        self.server.print(installation)
    }
}

struct StaleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stale",
        abstract: "Installations not seen for 30 days: how many, and the least recently seen of them."
    )
    @OptionGroup var server: ServerOptions
    @Option(help: "How many to list (1-1000).") var limit = 100

    func run() async throws {
        let (total, installations) = try await self.server.withClient(command: "stale") {
            try await $0.staleInstallations(limit: self.limit, in: self.server.project)
        }
        if self.server.json {
            printJSON(.object(JSONObject([
                .init(key: "total", value: jsonNumber(total)),
                .init(key: "installations", value: .array(installations.map(\.json))),
            ])))
        } else {
            installations.forEach { print($0.line) }
            print("# \(total) stale")
        }
    }
}

struct PruneCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "prune", abstract: "Delete installations not seen for 270 days (fanoutd also does it hourly).")
    @OptionGroup var server: ServerOptions

    func run() async throws {
        let count = try await self.server.withClient(command: "prune") { try await $0.pruneExpiredInstallations(in: self.server.project) }
        self.server.print(count: count, of: "deleted")
    }
}

struct ExpireCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "expire", abstract: "Remove deliveries whose TTL ran out now (fanoutd also does it every second).")
    @OptionGroup var server: ServerOptions

    func run() async throws {
        let count = try await self.server.withClient(command: "expire") { try await $0.expireDeliveries(in: self.server.project) }
        self.server.print(count: count, of: "expired")
    }
}

struct AudienceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audience",
        abstract: "How many installations a topic, a condition or a user's devices reach now."
    )
    @OptionGroup var server: ServerOptions
    @Option(help: "A topic.") var topic: String?
    @Option(help: "A condition, e.g. \"'a' in topics && !('b' in topics)\".") var condition: String?
    @Option(help: "A user id.") var user: String?

    func run() async throws {
        let targets = [self.topic.map(AudienceTarget.topic), self.condition.map(AudienceTarget.condition), self.user.map(AudienceTarget.user)].compactMap { $0 }
        guard targets.count == 1, let target = targets.first else {
            throw ValidationError("give exactly one of --topic, --condition, --user")
        }
        let count = try await self.server.withClient(command: "audience") { try await $0.audience(target, in: self.server.project) }
        self.server.print(count: count, of: "installations")
    }
}

extension ServerOptions {
    func print(count: Int, of what: String) {
        if self.json {
            printJSON(.object(JSONObject([.init(key: what, value: jsonNumber(count))])))
        } else {
            Swift.print("\(count) \(what)")
        }
    }
}
