import ArgumentParser
import FanoutClient
import FanoutCore
import FanoutWire

struct ProjectCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "project",
        abstract: "Create, delete or list the projects of a fanoutd.",
        subcommands: [Create.self, Delete.self, List.self, LegacyIDs.self]
    )

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a project.")
        @OptionGroup var server: ServerOptions
        @Argument(help: "The project id (6-30 of a-z, 0-9, -).") var id: String

        func run() async throws {
            try await self.server.withClient(command: "project create") { try await $0.createProject(self.id) }
            if self.server.json {
                printJSON(.object(JSONObject([.init(key: "project", value: .string(self.id)), .init(key: "created", value: .bool(true))])))
            } else {
                print("created \(self.id)")
            }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a project and everything in it.")
        @OptionGroup var server: ServerOptions
        @Argument(help: "The project id.") var id: String

        func run() async throws {
            try await self.server.withClient(command: "project delete") { try await $0.deleteProject(self.id) }
            if self.server.json {
                printJSON(.object(JSONObject([.init(key: "project", value: .string(self.id)), .init(key: "deleted", value: .bool(true))])))
            } else {
                print("deleted \(self.id)")
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the projects the key may use.")
        @OptionGroup var server: ServerOptions

        func run() async throws {
            let names = try await self.server.withClient(command: "project list") { try await $0.listProjects() }
            self.server.print(names: names)
        }
    }

    struct LegacyIDs: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "legacy-ids",
            abstract: "Accept legacy 11-character Instance IDs as FIDs in the project (--project), or stop: on or off.",
            discussion: """
                Apps migrated from Instance ID to Firebase Installations keep their 11-character ID as \
                their FID. With this on, a registration offering one keeps it, and sends may name one \
                in `fid` and `fids`; off (the default), they are refused like any invalid FID. \
                Installations registered with one stay addressable after it is turned off.
                """
        )
        @OptionGroup var server: ServerOptions
        @Argument(help: "on or off.") var state: String

        func run() async throws {
            guard self.state == "on" || self.state == "off" else { throw ValidationError("legacy-ids takes on or off") }
            let accepted = self.state == "on"
            try await self.server.withClient(command: "project legacy-ids") { try await $0.setLegacyInstanceIDs(accepted, in: self.server.project) }
            if self.server.json {
                printJSON(.object(JSONObject([.init(key: "project", value: .string(self.server.project)), .init(key: "legacyInstanceIDs", value: .bool(accepted))])))
            } else {
                print("\(self.server.project): legacy Instance IDs \(accepted ? "accepted" : "refused")")
            }
        }
    }
}
