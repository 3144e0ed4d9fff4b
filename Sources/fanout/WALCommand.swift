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

        @Flag(help: "Print JSON lines: one per segment, then one per record ({\"lsn\",\"record\"}).") var json = false

        func run() throws {
            let scan = try examine(self.directory)
            if self.json {
                for segment in scan.segments {
                    let damage = (segment.contents?.damage ?? segment.unreadable).map { JSONValue.string("\($0)") } ?? .null
                    printJSON(.object(JSONObject([
                        .init(key: "segment", value: .string(segment.name)), .init(key: "bytes", value: jsonNumber(segment.size)),
                        .init(key: "damage", value: damage),
                    ])))
                    for batch in segment.contents?.batches ?? [] {
                        for (offset, record) in batch.records.enumerated() {
                            printJSON(.object(JSONObject([
                                .init(key: "lsn", value: jsonNumber(Int(batch.firstLSN) + offset)), .init(key: "record", value: .string(record.summary)),
                            ])))
                        }
                    }
                }
                return
            }
            for segment in scan.segments {
                print("# \(segment.name) (\(segment.size) bytes)")
                for batch in segment.contents?.batches ?? [] {
                    for (offset, record) in batch.records.enumerated() {
                        print("\(batch.firstLSN + UInt64(offset)) \(record.summary)")
                    }
                }
                if let damage = segment.contents?.damage ?? segment.unreadable {
                    print("# damaged \(damage)")
                }
            }
        }
    }

    struct Verify: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check the segments, snapshots and manifest; exit 0 when clean, 1 when anything is wrong (and say what start-up and a repair do about it)."
        )

        @Argument(help: "The data directory.")
        var directory: String

        @Flag(help: "Print one JSON object: clean, the counts, the problems and what start-up does.") var json = false

        func run() throws {
            let scan = try examine(self.directory)
            let problems = scan.problems
            let plan = scan.plan()
            let records = scan.segments.reduce(0) { total, segment in
                total + (segment.contents?.batches.reduce(0) { $0 + $1.count } ?? 0)
            }
            if self.json {
                printJSON(.object(JSONObject([
                    .init(key: "clean", value: .bool(problems.isEmpty)),
                    .init(key: "segments", value: jsonNumber(scan.segments.count)),
                    .init(key: "records", value: jsonNumber(records)),
                    .init(key: "snapshots", value: jsonNumber(scan.snapshots.count)),
                    .init(key: "problems", value: .array(problems.map { .string("\($0)") })),
                    .init(key: "startsAsIs", value: .bool(scan.allowsStart)),
                    .init(key: "loss", value: .string(plan.lossDescription)),
                ])))
                if !problems.isEmpty { throw ExitCode(1) }
                return
            }
            guard !problems.isEmpty else {
                print("clean: \(scan.segments.count) segments, \(records) records, \(scan.snapshots.count) snapshots, LSNs \(plan.baseLSN)..<\(plan.endLSN) after the base")
                return
            }
            for problem in problems { print("damaged: \(problem)") }
            if scan.allowsStart {
                print("start-up proceeds: it cuts a torn tail, moves a damaged snapshot aside or writes the manifest; \(plan.lossDescription)")
            } else {
                print("start-up refuses this directory. `fanout wal repair \(self.directory)` keeps \(plan.keptDescription): \(plan.lossDescription)")
            }
            throw ExitCode(1)
        }
    }

    struct Repair: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Bring the log to a state that starts, keeping its longest intact prefix; what is dropped goes to DIR/quarantine."
        )

        @Argument(help: "The data directory.")
        var directory: String

        @Flag(help: "Print what the repair would do and what it would lose; change nothing.")
        var dryRun = false

        @Flag(help: "Required when the repair drops acknowledged records (the dry run says so).")
        var truncateAtCorruption = false

        @Flag(help: "Print one JSON object: the actions, whether they were applied, what is lost.") var json = false

        func run() throws {
            let repair: WALDirectory.Repair
            do {
                repair = try WALDirectory.repair(self.directory, dryRun: self.dryRun, allowingLoss: self.truncateAtCorruption)
            } catch {
                writeToStandardError("fanout wal repair: \(error.message)\n")
                throw ExitCode(2)
            }
            if self.json {
                printJSON(.object(JSONObject([
                    .init(key: "actions", value: .array(repair.actions.map { .string("\($0)") })),
                    .init(key: "applied", value: .bool(repair.applied)),
                    .init(key: "loss", value: .string(repair.plan.lossDescription)),
                ])))
                if !self.dryRun && !repair.actions.isEmpty && !repair.applied { throw ExitCode(1) }
                return
            }
            guard !repair.actions.isEmpty else {
                print("nothing to repair: the log is clean")
                return
            }
            for action in repair.actions { print(action) }
            let base = repair.plan.snapshot.map { "the snapshot \($0) and the log after it" } ?? "the log"
            print("\(repair.applied ? "the directory now starts" : "the repaired directory would start") from \(base), keeping \(repair.plan.keptDescription); \(repair.plan.lossDescription)")
            if !self.dryRun && !repair.applied {
                writeToStandardError("fanout wal repair: nothing was changed; this repair drops acknowledged records: pass --truncate-at-corruption to confirm\n")
                throw ExitCode(1)
            }
        }
    }
}

/// Examines a directory or fails with exit code 2.
func examine(_ directory: String) throws -> WALScan {
    do {
        return try WALDirectory.examine(directory)
    } catch {
        writeToStandardError("fanout wal: \(error.message)\n")
        throw ExitCode(2)
    }
}
