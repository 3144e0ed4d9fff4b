import ArgumentParser
import FanoutCore

struct SnapshotCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "snapshot",
        abstract: "Write a snapshot of a data directory now (recovering it first), then drop the log it covers.",
        discussion: "Takes the directory's lock: run it while no fanoutd uses the directory."
    )

    @Argument(help: "The data directory.")
    var directory: String

    func run() throws {
        do {
            let engine = try Engine(directory: self.directory, durability: .always)
            let path = try engine.snapshot()
            try engine.close()
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
