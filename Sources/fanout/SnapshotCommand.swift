import ArgumentParser
import FanoutClient
import FanoutCore

struct SnapshotCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "snapshot",
        abstract: "Write a snapshot now, through fanoutd or offline into a data directory, then drop the log it covers.",
        discussion: """
            With DIR, offline: recovers the directory first and takes its lock (run it while no fanoutd \
            uses the directory). Without, fanoutd writes one (a key for all projects is needed).
            """
    )

    @OptionGroup var server: ServerOptions

    @Argument(help: "The data directory, offline; without it, ask fanoutd.")
    var directory: String?

    func run() async throws {
        guard let directory = self.directory else {
            let file = try await self.server.withClient(command: "snapshot") { try await $0.snapshot() }
            if self.server.json {
                printJSON(.object(JSONObject([.init(key: "snapshot", value: .string(file))])))
            } else {
                print("wrote \(file)")
            }
            return
        }
        do {
            let engine = try Engine(directory: directory, durability: .always)
            let path = try engine.snapshot()
            try engine.close()
            if self.server.json {
                printJSON(.object(JSONObject([
                    .init(key: "snapshot", value: .string(path)),
                    .init(key: "recoveredRecords", value: jsonNumber(engine.recovery?.records ?? 0)),
                ])))
                return
            }
            if let recovery = engine.recovery {
                print("recovered \(recovery.records) log records in \(recovery.duration)")
            }
            print("wrote \(path)")
        } catch {
            writeToStandardError("fanout snapshot: \(error.message)\n")
            throw ExitCode(error.code == .unavailable ? 2 : 1)
        }
    }
}
