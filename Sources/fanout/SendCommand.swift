import ArgumentParser
import FanoutClient
import FanoutWire
import FanoutCore

struct SendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send one FCM v1 body through fanoutd, or offline into a data directory (--data-dir).",
        discussion: """
            Prints the message id, the audience size and per-recipient errors (for token, FID and \
            multicast targets, in input order); with --json or --data-dir, \
            {"name":"projects/P/messages/N","audience":A,"enqueued":E,"recipients":[...]}. A refused \
            message prints FCM's error object (--json) or its violations. --data-dir takes the \
            directory's lock: use it while no fanoutd serves the directory. \
            Exit codes: 0 sent, 1 invalid message or unknown project, 2 usage, I/O or connection error.
            """
    )

    @OptionGroup var server: ServerOptions

    @Option(name: .customLong("data-dir"), help: "Send offline into this data directory instead of through a server.")
    var dataDirectory: String?

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
            let receipt = try await self.server.withClient(command: "send") { try await $0.send(bytes, in: self.server.project) }
            if self.server.json {
                Self.printJSON(name: receipt.messageID, audience: Int(receipt.audience), enqueued: Int(receipt.enqueued), recipients: receipt.recipients)
            } else {
                print("\(receipt.messageID) audience=\(receipt.audience) enqueued=\(receipt.enqueued)")
                for (index, result) in receipt.recipients.enumerated() where result != .ok {
                    print("  recipient #\(index + 1): \(result)")
                }
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
            result = try await engine.send(bytes, in: project)
        } catch where !error.violations.isEmpty {
            print(String(decoding: JSONWriter.encode(MessageError(violations: error.violations).json), as: UTF8.self))
            throw ExitCode(1)
        } catch {
            writeToStandardError("fanout send: \(error)\n")
            throw ExitCode(error.code == .unavailable ? 2 : 1)
        }
        Self.printJSON(name: result.messageID, audience: result.audience, enqueued: result.enqueued, recipients: result.recipients)
    }

    static func printJSON(name: String, audience: Int, enqueued: Int, recipients: [BatchItemResult]) {
        let output = JSONObject([
            .init(key: "name", value: .string(name)),
            .init(key: "audience", value: .number(JSONNumber(text: String(audience)))),
            .init(key: "enqueued", value: .number(JSONNumber(text: String(enqueued)))),
            .init(key: "recipients", value: .array(recipients.map { JSONValue.string($0.description) })),
        ])
        print(String(decoding: JSONWriter.encode(.object(output)), as: UTF8.self))
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
            let kind = delivery.marker ? " deleted-messages-marker" : ""
            let messageID = "projects/\(self.server.project)/messages/\(delivery.id.messageSequence)"
            print("\(delivery.id) \(messageID) \(delivery.platform) expires=\(delivery.expiry) bytes=\(delivery.bytes)\(kind)")
        }
        print("# \(deliveries.count) pending")
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
