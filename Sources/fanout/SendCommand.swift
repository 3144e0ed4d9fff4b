import ArgumentParser
import FanoutCore

struct SendCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send one FCM v1 body to a project of a data directory (offline), durably.",
        discussion: """
            Prints {"name":"projects/P/messages/N","audience":A,"enqueued":E,"recipients":[...]} (recipients \
            for token, FID and multicast targets, in input order), or FCM's error object. Takes the \
            directory's lock: run it while no fanoutd uses the directory. \
            Exit codes: 0 sent, 1 invalid message or unknown project, 2 usage or I/O error.
            """
    )

    @Argument(help: "The data directory.")
    var directory: String

    @Argument(help: "The JSON file to read, or - for standard input.")
    var file: String = "-"

    @Option(help: "The project to send in.")
    var project: String = ProjectID.default.value

    func run() throws {
        guard let project = ProjectID(self.project) else {
            writeToStandardError("fanout send: invalid project id \(self.project)\n")
            throw ExitCode(2)
        }
        let bytes: [UInt8]
        do {
            bytes = try readInput(self.file, limit: JSONParser.Limits().maximumBytes + 1)
        } catch {
            writeToStandardError("fanout send: \(error)\n")
            throw ExitCode(2)
        }
        let engine = try openEngine(self.directory, command: "send")
        defer { try? engine.close() }
        let result: SendResult
        do {
            result = try engine.send(bytes, in: project)
        } catch where !error.violations.isEmpty {
            print(String(decoding: JSONWriter.encode(MessageError(violations: error.violations).json), as: UTF8.self))
            throw ExitCode(1)
        } catch {
            writeToStandardError("fanout send: \(error)\n")
            throw ExitCode(error.code == .unavailable ? 2 : 1)
        }
        let recipients = result.recipients.map { JSONValue.string($0.description) }
        let output = JSONObject([
            .init(key: "name", value: .string(result.messageID)),
            .init(key: "audience", value: .number(JSONNumber(text: String(result.audience)))),
            .init(key: "enqueued", value: .number(JSONNumber(text: String(result.enqueued)))),
            .init(key: "recipients", value: .array(recipients)),
        ])
        print(String(decoding: JSONWriter.encode(.object(output)), as: UTF8.self))
    }
}

struct PendingCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pending",
        abstract: "List the deliveries waiting for one installation of a data directory (offline).",
        discussion: """
            One line per delivery, oldest first: delivery id, message id, platform, expiry, payload \
            size (payloads and tokens are not printed). Exit codes: 0 listed, 1 unknown installation \
            or project, 2 usage or I/O error.
            """
    )

    @Argument(help: "The data directory.")
    var directory: String

    @Option(help: "The installation's FID.")
    var fid: String

    @Option(help: "The project of the installation.")
    var project: String = ProjectID.default.value

    func run() throws {
        guard let project = ProjectID(self.project), let fid = FID(self.fid) else {
            writeToStandardError("fanout pending: invalid \(ProjectID(self.project) == nil ? "project id" : "FID")\n")
            throw ExitCode(2)
        }
        let engine = try openEngine(self.directory, command: "pending")
        defer { try? engine.close() }
        let deliveries: [Delivery]
        do {
            deliveries = try engine.pendingDeliveries(for: .fid(fid), in: project)
        } catch {
            writeToStandardError("fanout pending: \(error)\n")
            throw ExitCode(error.code == .unavailable ? 2 : 1)
        }
        for delivery in deliveries {
            let kind = delivery.isDeletedMessagesMarker ? " deleted-messages-marker" : ""
            print("\(delivery.id) \(delivery.messageID) \(delivery.platform) expires=\(delivery.expiry) bytes=\(delivery.payload.count)\(kind)")
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
