import ArgumentParser
import FanoutCore

#if canImport(Glibc)
import Glibc
#endif

struct ValidateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "validate",
        abstract: "Validate one FCM v1 send body (or bare message) offline, as the engine would.",
        discussion: """
            Prints {"valid":true,"target":{...},"payloadBytes":N,"limitBytes":L} or FCM's error object \
            ({"error":{"code":400,"status":"INVALID_ARGUMENT",...,"details":[{"field":...}]}}). \
            Exit codes: 0 valid, 1 invalid, 2 usage or I/O error.
            """
    )

    @Argument(help: "The JSON file to read, or - for standard input.")
    var file: String = "-"

    @Option(name: .customLong("platform"), help: "Also check the rendered payload limit of this platform (ios, android, web).")
    var platformName: String?

    var platform: Platform? { self.platformName.flatMap(Platform.init(rawValue:)) }

    func validate() throws {
        if let name = self.platformName, Platform(rawValue: name) == nil {
            throw ValidationError("--platform must be ios, android or web")
        }
    }

    func run() throws {
        let bytes: [UInt8]
        do {
            bytes = try readInput(self.file, limit: JSONParser.Limits().maximumBytes + 1)
        } catch {
            writeToStandardError("fanout validate: \(error)\n")
            throw ExitCode(2)
        }
        let request: SendRequest
        do {
            request = try MessageParser.parseSendRequest(bytes)
        } catch {
            print(String(decoding: JSONWriter.encode(error.json), as: UTF8.self))
            throw ExitCode(1)
        }
        let message = request.message
        var members: [JSONObject.Member] = [
            .init(key: "valid", value: .bool(true)),
            .init(
                key: "target",
                value: .object(
                    JSONObject([
                        .init(key: "kind", value: .string(message.target.kind)),
                        .init(key: "value", value: .string(message.target.description)),
                    ])
                )
            ),
            .init(key: "payloadBytes", value: .number(JSONNumber(text: String(message.payloadBytes)))),
            .init(key: "limitBytes", value: .number(JSONNumber(text: String(message.payloadLimit)))),
        ]
        if let platform = self.platform {
            let report = RenderedMessage(message, acceptedAt: SystemWallClock().now()).sizeReport(for: platform)
            if let refusal = report.refusal {
                // The send's wording, on the whole message (a dry run has no recipient).
                let error = MessageError(violations: [FieldViolation(field: "message", description: refusal.description)])
                print(String(decoding: JSONWriter.encode(error.json), as: UTF8.self))
                throw ExitCode(1)
            }
            var platformObject = JSONObject([
                .init(key: "name", value: .string(platform.rawValue)),
                .init(key: "payloadBytes", value: .number(JSONNumber(text: String(report.renderedBytes)))),
            ])
            if let limit = report.limit {
                platformObject.members.append(.init(key: "limitBytes", value: .number(JSONNumber(text: String(limit)))))
            }
            members.append(.init(key: "platform", value: .object(platformObject)))
        }
        print(String(decoding: JSONWriter.encode(.object(JSONObject(members))), as: UTF8.self))
    }
}

struct InputError: Error, CustomStringConvertible {
    var description: String
}

/// Reads a file (or stdin for `-`), at most `limit` bytes; the parser reports anything longer.
func readInput(_ path: String, limit: Int) throws -> [UInt8] {
    let descriptor = path == "-" ? 0 : open(path, O_RDONLY)
    guard descriptor >= 0 else {
        throw InputError(description: "cannot open \(path): \(String(cString: strerror(errno)))")
    }
    defer { if descriptor != 0 { close(descriptor) } }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while bytes.count < limit {
        let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, min($0.count, limit - bytes.count)) }
        if count < 0 {
            if errno == EINTR { continue }
            throw InputError(description: "cannot read \(path): \(String(cString: strerror(errno)))")
        }
        if count == 0 { break }
        bytes.append(contentsOf: chunk[0..<count])
    }
    return bytes
}
