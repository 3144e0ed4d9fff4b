import ArgumentParser
import FanoutClient
import FanoutCore
import FanoutWire

/// `fanout register --file`: reads the file in batches of up to 1000 lines, sends each as one
/// REGISTER_BATCH_FIDS (a FID and flags per line, not the installation it sent) with `window` batches in flight, and reports refused lines by number (never
/// their tokens), progress on stderr each second, and a summary.
func importRegistrations(_ file: RegistrationFile, window: Int, server: ServerOptions) async throws {
    var file = file
    let started = ContinuousClock.now
    var lastProgress = started
    var summary = ImportSummary()

    func refuse(line: Int, _ reason: String) {
        summary.refused += 1
        if !server.json, summary.refused <= 20 {
            writeToStandardError("line \(line): \(reason)\n")
        }
    }

    func collect(_ lines: [Int], _ receipts: [RegistrationReceipt]) {
        for (line, receipt) in zip(lines, receipts) {
            switch receipt {
            case .registered(_, _, let isExisting):
                if isExisting { summary.existing += 1 } else { summary.registered += 1 }
            case .failed(let error):
                summary.failures[error.code.name, default: 0] += 1
                refuse(line: line, "\(error.code.name): \(error.message)" + (error.field.map { " (\($0))" } ?? ""))
            }
        }
        if ContinuousClock.now - lastProgress > .seconds(1) {
            lastProgress = ContinuousClock.now
            let seconds = (ContinuousClock.now - started) / .seconds(1)
            let done = summary.registered + summary.existing + summary.refused
            writeToStandardError("registered \(summary.registered + summary.existing) of \(done) lines (\(Int(Double(done) / seconds)) per second)\n")
        }
    }

    try await server.withClient(command: "register") { client in
        try await withThrowingTaskGroup(of: ([Int], [RegistrationReceipt]).self) { group in
            var inFlight = 0
            while true {
                var lines: [Int] = []
                var batch: [RegistrationFields] = []
                while batch.count < 1000, let (line, fields) = try file.next() {
                    switch fields {
                    case .success(let fields):
                        lines.append(line)
                        batch.append(fields)
                    case .failure(let error):
                        summary.failures["UNREADABLE", default: 0] += 1
                        refuse(line: line, error.message)
                    }
                }
                guard !batch.isEmpty else { break }
                group.addTask { (lines, try await client.registerReturningFIDs(batch, in: server.project)) }
                inFlight += 1
                if inFlight >= max(window, 1), let (lines, receipts) = try await group.next() {
                    inFlight -= 1
                    collect(lines, receipts)
                }
            }
            for try await (lines, receipts) in group { collect(lines, receipts) }
        }
    }
    let total = summary.registered + summary.existing + summary.refused
    if server.json {
        printJSON(.object(JSONObject([
            .init(key: "lines", value: jsonNumber(total)),
            .init(key: "registered", value: jsonNumber(summary.registered)),
            .init(key: "existing", value: jsonNumber(summary.existing)),
            .init(key: "refused", value: jsonNumber(summary.refused)),
            .init(key: "failed", value: .object(JSONObject(summary.failures.sorted { $0.key < $1.key }.map { .init(key: $0.key, value: jsonNumber($0.value)) }))),
        ])))
    } else {
        var text = "registered \(summary.registered) new and \(summary.existing) already there, of \(total) lines"
        if summary.refused > 0 {
            text += "; refused \(summary.refused): " + summary.failures.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        }
        print(text)
    }
    if summary.refused > 0 { throw ExitCode(1) }
}

/// What an import did, by outcome.
private struct ImportSummary {
    var registered = 0
    var existing = 0
    var refused = 0
    /// Refusals by status name (`UNREADABLE`: a line that could not be read).
    var failures: [String: Int] = [:]
}
