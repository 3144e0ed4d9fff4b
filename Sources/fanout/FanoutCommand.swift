import ArgumentParser
import FanoutCore

#if canImport(Glibc)
import Glibc
#endif

/// `fanout`: offline tools for the fanout engine, and a client of `fanoutd`.
///
/// Exit codes: 0 success or valid input, 1 invalid input, 2 usage error.
@main
struct FanoutCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fanout",
        abstract: "Tools for fanout, an FCM-style message routing and topic fan-out engine.",
        discussion: """
            A client of fanoutd (--server, --api-key or FANOUT_SERVER, FANOUT_API_KEY): projects, \
            installations, users, subscriptions, sends, consumers and statistics. Offline: checks \
            of FIDs, topic names, conditions and messages exactly as the engine validates them, \
            the write-ahead log's tools, and a demo of the engine.

            Exit codes: 0 valid / success, 1 invalid input, 2 usage error.
            """,
        subcommands: [
            ProjectCommand.self, RegisterCommand.self, RefreshCommand.self, DeleteCommand.self, InstallationCommand.self,
            TouchCommand.self, APNsCommand.self, StaleCommand.self, PruneCommand.self, UserCommand.self, SubscribeCommand.self,
            UnsubscribeCommand.self, TopicsCommand.self, AudienceCommand.self, SendCommand.self, PendingCommand.self,
            TailCommand.self, ExpireCommand.self, StatsCommand.self,
            FIDCommand.self, TopicCommand.self, ConditionCommand.self, ValidateCommand.self, WALCommand.self,
            SnapshotCommand.self, KeyCommand.self, AuthCommand.self, TLSCommand.self, ClusterCommand.self, DemoCommand.self,
        ]
    )

    static func main() async {
        do {
            var command = try Self.parseAsRoot()
            if var command = command as? any AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch {
            // ArgumentParser reports usage errors as 64; this tool promises 2.
            if Self.exitCode(for: error) == .validationFailure {
                writeToStandardError(Self.fullMessage(for: error) + "\n")
                Glibc.exit(2)
            }
            Self.exit(withError: error)
        }
    }
}

/// Writes `text` to stderr (file descriptor 2) without Foundation.
func writeToStandardError(_ text: String) {
    var text = text
    text.withUTF8 { bytes in
        var offset = 0
        while offset < bytes.count {
            let written = write(2, bytes.baseAddress! + offset, bytes.count - offset)
            if written <= 0 { return }
            offset += written
        }
    }
}

/// Prints `message` to stderr and fails with exit code 1 (invalid input).
func invalid(_ message: String) -> ExitCode {
    writeToStandardError(message + "\n")
    return ExitCode(1)
}
