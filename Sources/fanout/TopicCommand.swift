import ArgumentParser
import FanoutCore

struct TopicCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "topic",
        abstract: "Check topic names.",
        subcommands: [Check.self]
    )

    struct Check: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check a topic name ([a-zA-Z0-9-_.~%]{1,900}, one leading /topics/ stripped); print the name as stored."
        )

        @Argument(help: "The topic name to check.")
        var name: String

        func run() throws {
            guard let topic = TopicName(self.name) else {
                throw invalid(
                    "invalid topic name: expected 1...900 characters of [a-zA-Z0-9-_.~%], optionally after one /topics/"
                )
            }
            print(topic.value)
        }
    }
}
