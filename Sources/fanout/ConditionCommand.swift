import ArgumentParser
import FanoutCore

struct ConditionCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "condition",
        abstract: "Check topic conditions.",
        subcommands: [Check.self]
    )

    struct Check: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Parse a topic condition and print it fully parenthesised.",
            discussion: """
                Operators are evaluated left to right after parentheses, with no precedence between && and || \
                ('A' in topics || 'B' in topics && 'C' in topics means (A || B) && C). At most 5 topics.
                """
        )

        @Argument(help: "The condition, e.g. \"'TopicA' in topics && ('TopicB' in topics || 'TopicC' in topics)\".")
        var expression: String

        @Flag(help: "Print JSON: {\"valid\":true,\"condition\":...} or FCM's error object.") var json = false

        func run() throws {
            var parsed: String?
            var message: String?
            do {
                parsed = try Condition(parsing: self.expression).description
            } catch {
                message = error.message
            }
            try printCheck(json: self.json, key: "condition", value: parsed ?? "", line: parsed ?? "", error: message, field: "condition")
        }
    }
}
