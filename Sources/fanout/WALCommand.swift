import ArgumentParser
import FanoutCore

struct WALCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "wal",
        abstract: "Read, check and repair a data directory's write-ahead log (offline).",
        subcommands: [Inspect.self, Verify.self, Repair.self]
    )

    struct Inspect: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print every record, one line each, with its LSN (tokens redacted)."
        )

        @Argument(help: "The data directory.")
        var directory: String

        func run() throws {
            let segments = try loadSegments(self.directory)
            for segment in segments {
                print("# \(segment.name) (\(segment.size) bytes)")
                for batch in segment.contents?.batches ?? [] {
                    for (offset, record) in batch.records.enumerated() {
                        print("\(batch.firstLSN + UInt64(offset)) \(record.summary)")
                    }
                }
                if let damage = segment.damage {
                    print("# damaged \(damage)")
                }
            }
        }
    }

    struct Verify: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check every segment; exit 0 when the log is clean, 1 when it is damaged (and say where)."
        )

        @Argument(help: "The data directory.")
        var directory: String

        func run() throws {
            let segments = try loadSegments(self.directory)
            var records = 0
            for segment in segments {
                records += segment.contents?.batches.reduce(0) { $0 + $1.records.count } ?? 0
                if let damage = segment.damage {
                    let last = segment.path == segments.last?.path
                    print("damaged: \(segment.path) \(damage)")
                    print(last
                        ? "this is the last segment: opening the directory cuts the log there (a torn tail)"
                        : "an earlier segment: the engine refuses to start; `fanout wal repair DIR --truncate-at-corruption` cuts the log there")
                    throw ExitCode(1)
                }
            }
            print("clean: \(segments.count) segments, \(records) records")
        }
    }

    struct Repair: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Cut the log at its first damage on purpose (everything after it is dropped)."
        )

        @Argument(help: "The data directory.")
        var directory: String

        @Flag(help: "Required: confirms that records after the damage are to be dropped.")
        var truncateAtCorruption = false

        func validate() throws {
            guard self.truncateAtCorruption else {
                throw ValidationError("repair drops every record after the first damage; pass --truncate-at-corruption to confirm")
            }
        }

        func run() throws {
            let repair: WALDirectory.Repair
            do {
                repair = try WALDirectory.repair(self.directory)
            } catch {
                writeToStandardError("fanout wal repair: \(error.message)\n")
                throw ExitCode(2)
            }
            guard repair.cut != nil || !repair.removed.isEmpty else {
                print("nothing to repair: the log is clean")
                return
            }
            if let cut = repair.cut { print("cut \(cut.path) at byte \(cut.offset)") }
            for path in repair.removed { print("removed \(path)") }
        }
    }
}

/// Reads a directory's segments or fails with exit code 2.
func loadSegments(_ directory: String) throws -> [WALDirectory.Segment] {
    do {
        return try WALDirectory.segments(in: directory)
    } catch {
        writeToStandardError("fanout wal: \(error.message)\n")
        throw ExitCode(2)
    }
}
