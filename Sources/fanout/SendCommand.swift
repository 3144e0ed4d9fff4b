import ArgumentParser
import FanoutClient
import FanoutWire
import FanoutCore

struct SendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send one FCM v1 body through fanoutd, or offline into a data directory (--data-dir).",
        discussion: """
            Prints the message id, the audience size, per platform what became of its recipients \
            (queued, refused with the reason, skipped, collapsed) and each refused recipient with \
            its reason (token, FID and multicast targets, in input order); with --json or \
            --data-dir, {"name":"projects/P/messages/N","audience":A,"enqueued":E,"recipients":[...],\
            "platforms":[...]} (docs/operations.md). Installations without a token get nothing; \
            --skip-stale skips those not seen for 30 days too. A refused \
            message prints FCM's error object (--json) or its violations. --data-dir takes the \
            directory's lock: use it while no fanoutd serves the directory. \
            Exit codes: 0 sent, 1 invalid message or unknown project, 2 usage, I/O or connection error.
            """
    )

    @OptionGroup var server: ServerOptions

    @Option(name: .customLong("data-dir"), help: "Send offline into this data directory instead of through a server.")
    var dataDirectory: String?

    @Flag(name: .customLong("skip-stale"), help: "Skip installations not seen for the stale age (30 days).")
    var skipStale = false

    @Argument(help: "The JSON file to read, or - for standard input.")
    var file: String = "-"

    func run() async throws {
        let bytes: [UInt8]
        do {
            bytes = try readInput(self.file, limit: JSONParser.Limits().maximumBytes + 1)
        } catch {
            writeToStandardError("fanout send: \(error)\n")
            throw ExitCode(2)
        }
        guard let directory = self.dataDirectory else {
            let receipt = try await self.server.withClient(command: "send") {
                try await $0.send(bytes, in: self.server.project, skipStale: self.skipStale)
            }
            let report = SendReport(receipt)
            if self.server.json {
                printJSON(report.json)
            } else {
                report.printLines()
            }
            return
        }
        guard let project = ProjectID(self.server.project) else {
            writeToStandardError("fanout send: invalid project id \(self.server.project)\n")
            throw ExitCode(2)
        }
        let engine = try openEngine(directory, command: "send")
        defer { try? engine.close() }
        let result: SendResult
        do {
            result = try await engine.send(bytes, in: project, options: SendOptions(skipStaleInstallations: self.skipStale))
        } catch where !error.violations.isEmpty {
            print(String(decoding: JSONWriter.encode(MessageError(violations: error.violations).json), as: UTF8.self))
            throw ExitCode(1)
        } catch {
            writeToStandardError("fanout send: \(error)\n")
            throw ExitCode(error.code == .unavailable ? 2 : 1)
        }
        printJSON(SendReport(result).json)
    }
}

/// What `fanout send` prints of a send's result, from the server or an offline engine.
struct SendReport {
    var name: String
    var audience: Int
    var enqueued: Int
    var recipients: [RecipientResult]
    var platforms: [PlatformSendReport]

    init(_ receipt: SendReceipt) {
        (self.name, self.audience, self.enqueued) = (receipt.messageID, Int(receipt.audience), Int(receipt.enqueued))
        (self.recipients, self.platforms) = (receipt.recipients, receipt.platforms)
    }

    init(_ result: SendResult) {
        (self.name, self.audience, self.enqueued) = (result.messageID, result.audience, result.enqueued)
        (self.recipients, self.platforms) = (result.recipients, result.platforms)
    }

    var json: JSONValue {
        .object(JSONObject([
            .init(key: "name", value: .string(self.name)),
            .init(key: "audience", value: jsonNumber(self.audience)),
            .init(key: "enqueued", value: jsonNumber(self.enqueued)),
            .init(key: "recipients", value: .array(self.recipients.map(Self.json))),
            .init(key: "platforms", value: .array(self.platforms.map(Self.json))),
        ]))
    }

    /// `{"status":"ok"}`, or the status with the field and description of the refusal.
    static func json(_ recipient: RecipientResult) -> JSONValue {
        switch recipient {
        case .ok:
            return .object(JSONObject([.init(key: "status", value: .string("ok"))]))
        case .failed(let error):
            return .object(JSONObject([
                .init(key: "status", value: .string(error.code.name)),
                .init(key: "field", value: error.field.map(JSONValue.string) ?? .null),
                .init(key: "description", value: .string(error.message)),
            ]))
        }
    }

    static func json(_ report: PlatformSendReport) -> JSONValue {
        var members: [JSONObject.Member] = [
            .init(key: "platform", value: .string(report.platform.rawValue)),
            .init(key: "renderedBytes", value: jsonNumber(report.renderedBytes)),
            .init(key: "limitBytes", value: report.limit.map(jsonNumber) ?? .null),
        ]
        let counts: [(String, Int)] = [
            ("audience", report.audience), ("enqueued", report.enqueued), ("refused", report.refused),
            ("skippedWithoutToken", report.skippedWithoutToken), ("skippedStale", report.skippedStale),
            ("collapsed", report.collapsed), ("dropped", report.dropped), ("expired", report.expired),
        ]
        members += counts.map { .init(key: $0.0, value: jsonNumber($0.1)) }
        if let refusal = report.refusal {
            members.append(.init(key: "refusal", value: .object(JSONObject([
                .init(key: "field", value: .string(refusal.field)),
                .init(key: "description", value: .string(refusal.description)),
            ]))))
        }
        return .object(JSONObject(members))
    }

    /// The id and totals, a line per platform the send reached, a line per refused recipient.
    func printLines() {
        print("\(self.name) audience=\(self.audience) enqueued=\(self.enqueued)")
        for report in self.platforms where report.audience > 0 {
            var line = "  \(report.platform): audience=\(report.audience) enqueued=\(report.enqueued)"
            for (name, count) in [
                ("refused", report.refused), ("skipped-without-token", report.skippedWithoutToken), ("skipped-stale", report.skippedStale),
                ("collapsed", report.collapsed), ("dropped", report.dropped), ("expired", report.expired),
            ] where count > 0 {
                line += " \(name)=\(count)"
            }
            if report.refused > 0, let refusal = report.refusal { line += " (\(refusal.description))" }
            print(line)
        }
        for (index, result) in self.recipients.enumerated() {
            if case .failed(let error) = result { print("  recipient #\(index + 1): \(error)") }
        }
    }
}

struct PendingCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pending",
        abstract: "List the deliveries waiting for one installation, through fanoutd or offline (--data-dir).",
        discussion: """
            One line per delivery, oldest first: delivery id, message id, platform, expiry, payload \
            size (payloads and tokens are not printed). Exit codes: 0 listed, 1 unknown installation \
            or project, 2 usage, I/O or connection error.
            """
    )

    @OptionGroup var server: ServerOptions

    @Option(name: .customLong("data-dir"), help: "Read this data directory offline instead of asking a server.")
    var dataDirectory: String?

    @Argument(help: "The installation: FID or token.")
    var registration: String

    func run() async throws {
        let deliveries: [(id: DeliveryID, platform: Platform, expiry: Timestamp, bytes: Int, marker: Bool)]
        if let directory = self.dataDirectory {
            guard let project = ProjectID(self.server.project), let address = RegistrationAddress(parsing: self.registration) else {
                writeToStandardError("fanout pending: invalid \(ProjectID(self.server.project) == nil ? "project id" : "registration")\n")
                throw ExitCode(2)
            }
            let engine = try openEngine(directory, command: "pending")
            defer { try? engine.close() }
            do {
                deliveries = try engine.pendingDeliveries(for: address, in: project).map {
                    ($0.id, $0.platform, $0.expiry, $0.payload.count, $0.isDeletedMessagesMarker)
                }
            } catch {
                writeToStandardError("fanout pending: \(error)\n")
                throw ExitCode(error.code == .unavailable ? 2 : 1)
            }
        } else {
            deliveries = try await self.server.withClient(command: "pending") {
                try await $0.pendingDeliveries(for: self.registration, in: self.server.project)
            }.map { ($0.id, $0.platform, $0.expiry, $0.payload.count, $0.isDeletedMessagesMarker) }
        }
        for delivery in deliveries {
            let messageID = messageName(of: delivery.id, in: self.server.project)
            if self.server.json {
                printJSON(.object(JSONObject([
                    .init(key: "id", value: .string(delivery.id.description)),
                    .init(key: "message", value: .string(messageID)),
                    .init(key: "platform", value: .string(delivery.platform.rawValue)),
                    .init(key: "expiry", value: .string(delivery.expiry.iso8601)),
                    .init(key: "bytes", value: jsonNumber(delivery.bytes)),
                    .init(key: "deletedMessages", value: .bool(delivery.marker)),
                ])))
            } else {
                let kind = delivery.marker ? " deleted-messages-marker" : ""
                print("\(delivery.id) \(messageID) \(delivery.platform) expires=\(delivery.expiry.iso8601) bytes=\(delivery.bytes)\(kind)")
            }
        }
        if !self.server.json { print("# \(deliveries.count) pending") }
    }
}

/// Opens a data directory for a one-shot command (exit 2 when it cannot be opened).
func openEngine(_ directory: String, command: String) throws -> Engine {
    do {
        return try Engine(directory: directory, durability: .always)
    } catch {
        writeToStandardError("fanout \(command): \(error)\n")
        throw ExitCode(2)
    }
}
