import FanoutCore
import FanoutWire

/// Registrations to import, one per line: CSV with a header row naming the columns, or JSON lines
/// (one object per line; chosen when the first line starts with `{`). Columns and keys: `token`,
/// `fid`, `platform`, `appId`, `deviceName`, `deviceOs`, `deviceType`, `apnsToken`; `platform` and
/// `appId` default to the command's `--platform` and `--app-id`. Empty lines are skipped. A line
/// that cannot be read is reported by its number and not sent.
struct RegistrationFile {
    enum Format {
        case csv(columns: [String])
        case jsonLines
    }

    static let columns: Set<String> = ["token", "fid", "platform", "appId", "deviceName", "deviceOs", "deviceType", "apnsToken"]

    private let lines: LineReader
    private var format: Format?
    private let defaultPlatform: Platform?
    private let defaultAppID: String?
    /// The number of the last line read (1-based).
    private(set) var lineNumber = 0

    init(lines: LineReader, platform: Platform?, appID: String?) {
        self.lines = lines
        self.defaultPlatform = platform
        self.defaultAppID = appID
    }

    /// The next registration with its line number, or the line's problem; nil at the end.
    /// - Throws: when the CSV header is unusable (nothing can be read after it).
    mutating func next() throws(RegistrationFile.HeaderError) -> (line: Int, fields: Result<RegistrationFields, LineError>)? {
        while let text = self.lines.next() {
            self.lineNumber += 1
            guard !text.allSatisfy({ $0 == " " || $0 == "\t" }) else { continue }
            let format: Format
            if let known = self.format {
                format = known
            } else if text.first == "{" {
                format = .jsonLines
                self.format = format
            } else {
                let columns = Self.csvFields(text)
                guard case .success(let names) = columns, !names.isEmpty else {
                    throw HeaderError(message: "line 1: the CSV header does not parse")
                }
                for name in names where !Self.columns.contains(name) {
                    throw HeaderError(message: "line 1: unknown column \"\(name)\" (columns: \(Self.columns.sorted().joined(separator: ", ")))")
                }
                self.format = .csv(columns: names)
                continue
            }
            return (self.lineNumber, self.fields(text, format: format))
        }
        return nil
    }

    private func fields(_ text: String, format: Format) -> Result<RegistrationFields, LineError> {
        var values: [String: String] = [:]
        switch format {
        case .csv(let columns):
            switch Self.csvFields(text) {
            case .failure(let error):
                return .failure(error)
            case .success(let cells):
                guard cells.count == columns.count else {
                    return .failure(LineError(message: "\(cells.count) fields, the header names \(columns.count)"))
                }
                for (name, cell) in zip(columns, cells) where !cell.isEmpty { values[name] = cell }
            }
        case .jsonLines:
            guard let value = try? JSONParser.parse(Array(text.utf8)), case .object(let object) = value else {
                return .failure(LineError(message: "not a JSON object"))
            }
            for member in object.members {
                guard Self.columns.contains(member.key) else {
                    return .failure(LineError(message: "unknown key \"\(member.key)\""))
                }
                switch member.value {
                case .string(let string): values[member.key] = string
                case .null: break
                default: return .failure(LineError(message: "\(member.key) must be a string"))
                }
            }
        }
        let platform: Platform
        if let name = values["platform"] {
            guard let parsed = Platform(rawValue: name) else { return .failure(LineError(message: "platform must be android, ios or web")) }
            platform = parsed
        } else if let fallback = self.defaultPlatform {
            platform = fallback
        } else {
            return .failure(LineError(message: "no platform (give the column, or --platform)"))
        }
        guard let appID = values["appId"] ?? self.defaultAppID else {
            return .failure(LineError(message: "no app id (give the column, or --app-id)"))
        }
        return .success(RegistrationFields(
            offeredFID: values["fid"],
            token: values["token"],
            platform: platform,
            appID: appID,
            deviceName: values["deviceName"],
            deviceOS: values["deviceOs"],
            deviceType: values["deviceType"],
            apnsToken: values["apnsToken"]
        ))
    }

    /// A CSV line's fields (RFC 4180: a field in double quotes may hold commas, and `""` for a quote).
    static func csvFields(_ line: String) -> Result<[String], LineError> {
        var fields: [String] = []
        var field = ""
        var quoted = false
        var atFieldStart = true
        var characters = line.makeIterator()
        while let character = characters.next() {
            if quoted {
                if character == "\"" {
                    // A quote ends the field unless another follows.
                    var lookahead = characters
                    if lookahead.next() == "\"" {
                        field.append("\"")
                        characters = lookahead
                    } else {
                        quoted = false
                    }
                } else {
                    field.append(character)
                }
                continue
            }
            switch character {
            case "," :
                fields.append(field)
                field = ""
                atFieldStart = true
                continue
            case "\"" where atFieldStart:
                quoted = true
            case "\"":
                return .failure(LineError(message: "a quote inside an unquoted field"))
            default:
                field.append(character)
            }
            atFieldStart = false
        }
        guard !quoted else { return .failure(LineError(message: "an unclosed quote")) }
        fields.append(field)
        return .success(fields)
    }

    struct LineError: Error {
        var message: String
    }

    /// A CSV header that cannot be used: the import stops (exit 2) before sending anything more.
    struct HeaderError: Error, CustomStringConvertible {
        var message: String
        var description: String { self.message }
    }
}
