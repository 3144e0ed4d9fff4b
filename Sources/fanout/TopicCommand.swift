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

        @Flag(help: "Print JSON: {\"valid\":true,\"topic\":...} or FCM's error object.") var json = false

        func run() throws {
            let topic = TopicName(self.name)
            try printCheck(
                json: self.json, key: "topic", value: topic?.value ?? "", line: topic?.value ?? "",
                error: topic == nil ? "invalid topic name: expected 1...900 characters of [a-zA-Z0-9-_.~%], optionally after one /topics/" : nil,
                field: "topic"
            )
        }
    }
}
