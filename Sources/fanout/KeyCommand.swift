import ArgumentParser
import FanoutCore
import FanoutKeys
import FanoutWire
import Foundation

/// `fanout key`: the API key file, edited in place (fanoutd rereads it on SIGHUP).
struct KeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "key",
        abstract: "Create, list and revoke the API keys of a key file.",
        discussion: """
            The key file keeps each key's name, role, projects and SHA-256, never the key: `create` \
            prints the new key once. Roles: admin (everything in its projects), sender (sends, \
            audiences and read-only lookups), consumer (delivery workers). fanoutd rereads the file on \
            SIGHUP (`kill -HUP PID`): connections whose key was revoked get GOAWAY and are closed. \
            Exit codes: 0 done, 1 refused (a taken or unknown name, a file that does not parse), 2 usage.
            """,
        subcommands: [Create.self, List.self, Revoke.self]
    )

    struct FileOptions: ParsableArguments {
        @Option(help: "The key file.")
        var file = "./fanout-data/api-keys"

        @Flag(help: "Print JSON.")
        var json = false

        func read(command: String, missingIsEmpty: Bool = false) throws -> APIKeyStore {
            if missingIsEmpty, !FileManager.default.fileExists(atPath: self.file) { return APIKeyStore([]) }
            do {
                return try APIKeyFile.read(self.file)
            } catch {
                writeToStandardError("fanout key \(command): \(error)\n")
                throw ExitCode(1)
            }
        }

        func write(_ keys: APIKeyStore, command: String) throws {
            do {
                try APIKeyFile.write(keys, to: self.file)
            } catch {
                writeToStandardError("fanout key \(command): \(error)\n")
                throw ExitCode(1)
            }
        }
    }

    static func json(_ key: APIKey) -> [JSONObject.Member] {
        [
            .init(key: "name", value: .string(key.name)),
            .init(key: "role", value: .string("\(key.role)")),
            .init(key: "projects", value: .array(key.projects.names.map(JSONValue.string))),
        ]
    }

    struct Create: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "create", abstract: "Add a key and print it (only now).")
        @OptionGroup var options: FileOptions
        @Option(help: "A name for listings and `revoke`: 1 to 64 of A-Z a-z 0-9 . _ -.") var name: String
        @Option(help: "admin, sender, consumer or app (registers installations with their credentials, nothing else).") var role: String
        @Option(help: "Comma-separated project ids, or * for every project.") var projects = "*"

        func run() throws {
            guard APIKey.isValidName(self.name) else {
                throw ValidationError("--name is 1 to \(APIKey.maximumNameLength) of A-Z a-z 0-9 . _ -")
            }
            guard let role = APIKey.keyRoles.first(where: { "\($0)" == self.role }) else {
                throw ValidationError("--role is admin, sender, consumer or app")
            }
            let names = self.projects.split(separator: ",").map(String.init)
            guard self.projects == "*" || (!names.isEmpty && names.allSatisfy { ProjectID($0) != nil }) else {
                throw ValidationError("--projects is * or comma-separated project ids")
            }
            var keys = try self.options.read(command: "create", missingIsEmpty: true)
            let (secret, key) = try APIKey.generate(name: self.name, role: role, projects: self.projects == "*" ? .all : .only(Set(names)))
            do {
                try keys.add(key)
            } catch {
                writeToStandardError("fanout key create: \(error)\n")
                throw ExitCode(1)
            }
            try self.options.write(keys, command: "create")
            if self.options.json {
                printJSON(.object(JSONObject(KeyCommand.json(key) + [.init(key: "key", value: .string(secret))])))
            } else {
                print(secret)
                writeToStandardError("fanout key create: \(key.name) (\(key.role), \(key.projects.names.joined(separator: ","))) added to \(self.options.file); this is the only time the key is shown. Send fanoutd SIGHUP to use it.\n")
            }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "The keys: name, role and projects (never the keys).")
        @OptionGroup var options: FileOptions

        func run() throws {
            let keys = try self.options.read(command: "list")
            for key in keys.keys {
                if self.options.json {
                    printJSON(.object(JSONObject(KeyCommand.json(key))))
                } else {
                    print("\(key.name)\t\(key.role)\t\(key.projects.names.joined(separator: ","))")
                }
            }
        }
    }

    struct Revoke: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "revoke", abstract: "Remove a key by name.")
        @OptionGroup var options: FileOptions
        @Argument(help: "The key's name.") var name: String

        func run() throws {
            var keys = try self.options.read(command: "revoke")
            guard keys.remove(named: self.name) else {
                writeToStandardError("fanout key revoke: no key is named \(self.name)\n")
                throw ExitCode(1)
            }
            guard !keys.keys.isEmpty else {
                writeToStandardError("fanout key revoke: \(self.name) is the last key; fanoutd would refuse an empty file\n")
                throw ExitCode(1)
            }
            try self.options.write(keys, command: "revoke")
            if self.options.json {
                printJSON(.object(JSONObject([.init(key: "revoked", value: .string(self.name))])))
            } else {
                print("revoked \(self.name); send fanoutd SIGHUP to close its connections")
            }
        }
    }
}
