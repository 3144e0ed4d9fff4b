import ArgumentParser
import FanoutClient
import FanoutCore

struct SnapshotCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "snapshot",
        abstract: "Write a snapshot now, through fanoutd or offline into a data directory, then drop the log it covers.",
        discussion: """
            With DIR, offline: recovers the directory first and takes its lock (run it while no fanoutd \
            uses the directory). Without, fanoutd writes one (a key for all projects is needed); a \
            cluster node writes one per shard, and its shards' owners publish theirs.
            """
    )

    @OptionGroup var server: ServerOptions

    @Argument(help: "The data directory, offline; without it, ask fanoutd.")
    var directory: String?

    func run() async throws {
        guard let directory = self.directory else {
            // One file from a fanoutd; one per shard (`shard-N/<name>`) from a cluster node.
            let files = try await self.server.withClient(command: "snapshot") { try await $0.snapshotFiles() }
            if self.server.json {
                var fields = [JSONObject.Member(key: "snapshot", value: .string(files.first ?? ""))]
                if files.count > 1 { fields.append(.init(key: "snapshots", value: .array(files.map { .string($0) }))) }
                printJSON(.object(JSONObject(fields)))
            } else {
                for file in files { print("wrote \(file)") }
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
