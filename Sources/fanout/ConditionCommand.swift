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

        func run() throws {
            do {
                print(try Condition(parsing: self.expression))
            } catch {
                throw invalid(error.message)
            }
        }
    }
}
