import ArgumentParser
import FanoutClient
import FanoutWire
import FanoutCore
import Foundation

/// Registrations from arguments or a file, sent in batches of 1000 with several batches in flight.
struct SubscriptionOptions: ParsableArguments {
    @Argument(help: "The topic.") var topic: String
    @Argument(help: "Registrations (FIDs or tokens).") var registrations: [String] = []
    @Option(help: "A file of registrations, one per line (- for standard input).") var file: String?
    @Option(help: "Batches in flight at once.") var window = 8

    func batches() throws -> AnyIterator<[String]> {
        var pending = self.registrations[...]
        var lines: LineReader?
        if let file = self.file {
            guard let reader = LineReader(path: file) else {
                throw ValidationError("cannot open \(file)")
            }
            lines = reader
        }
        return AnyIterator {
            var batch: [String] = []
            while batch.count < 1000, let next = pending.popFirst() { batch.append(next) }
            while batch.count < 1000, let line = lines?.next() {
                if !line.isEmpty { batch.append(line) }
            }
            return batch.isEmpty ? nil : batch
        }
    }
}

/// Subscribes or unsubscribes, printing failures (by position, never the token) and a summary;
/// progress on stderr while it runs.
func changeSubscriptions(subscribe: Bool, options: SubscriptionOptions, server: ServerOptions) async throws {
    let command = subscribe ? "subscribe" : "unsubscribe"
    let batches = try options.batches()
    let started = ContinuousClock.now
    var lastProgress = started
    var done = 0
    var failures: [String: Int] = [:]
    try await server.withClient(command: command) { client in
        try await withThrowingTaskGroup(of: (Int, [BatchItemResult]).self) { group in
            var inFlight = 0
            var offset = 0
            func collect(_ offset: Int, _ results: [BatchItemResult]) {
                done += results.count
                for (index, result) in results.enumerated() where result != .ok {
                    failures[result.description, default: 0] += 1
                    if !server.json, failures.values.reduce(0, +) <= 20 {
                        writeToStandardError("registration #\(offset + index + 1): \(result)\n")
                    }
                }
                if ContinuousClock.now - lastProgress > .seconds(1) {
                    lastProgress = ContinuousClock.now
                    let seconds = (ContinuousClock.now - started) / .seconds(1)
                    writeToStandardError("\(command)d \(done) (\(Int(Double(done) / seconds)) per second)\n")
                }
            }
            while let batch = batches.next() {
                let batchOffset = offset
                offset += batch.count
                group.addTask {
                    let results = subscribe
                        ? try await client.subscribe(batch, to: options.topic, in: server.project)
                        : try await client.unsubscribe(batch, from: options.topic, in: server.project)
                    return (batchOffset, results)
                }
                inFlight += 1
                if inFlight >= max(options.window, 1), let (at, results) = try await group.next() {
                    inFlight -= 1
                    collect(at, results)
                }
            }
            for try await (at, results) in group { collect(at, results) }
        }
    }
    let failed = failures.values.reduce(0, +)
    if server.json {
        printJSON(.object(JSONObject([
            .init(key: "topic", value: .string(options.topic)),
            .init(key: "ok", value: jsonNumber(done - failed)),
            .init(key: "failed", value: .object(JSONObject(failures.sorted { $0.key < $1.key }.map { .init(key: $0.key, value: jsonNumber($0.value)) }))),
        ])))
    } else {
        print("\(command)d \(done - failed) of \(done) to \(options.topic)" + (failed > 0 ? "; failed: " + failures.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") : ""))
    }
    if failed > 0 { throw ExitCode(1) }
}

struct SubscribeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "subscribe",
        abstract: "Subscribe registrations to a topic (batches of 1000, pipelined).",
        discussion: "Exit codes: 0 all subscribed, 1 some refused (listed by position), 2 usage or connection error."
    )
    @OptionGroup var server: ServerOptions
    @OptionGroup var subscriptions: SubscriptionOptions

    func run() async throws {
        try await changeSubscriptions(subscribe: true, options: self.subscriptions, server: self.server)
    }
}

struct UnsubscribeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "unsubscribe", abstract: "Unsubscribe registrations from a topic.")
    @OptionGroup var server: ServerOptions
    @OptionGroup var subscriptions: SubscriptionOptions

    func run() async throws {
        try await changeSubscriptions(subscribe: false, options: self.subscriptions, server: self.server)
    }
}

struct TopicsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "topics",
        abstract: "List a project's topics with their subscriber counts, or one installation's topics."
    )
    @OptionGroup var server: ServerOptions
    @Argument(help: "An installation (FID or token); without it, every topic.") var registration: String?

    func run() async throws {
        if let registration = self.registration {
            let topics = try await self.server.withClient(command: "topics") { try await $0.topics(of: registration, in: self.server.project) }
            self.server.print(names: topics)
            return
        }
        try await self.server.withClient(command: "topics") { client in
            var after = ""
            while true {
                let page = try await client.listTopics(after: after, limit: 1000, in: self.server.project)
                for topic in page {
                    if self.server.json {
                        printJSON(.object(JSONObject([.init(key: "topic", value: .string(topic.topic)), .init(key: "subscribers", value: jsonNumber(Int(topic.subscribers)))])))
                    } else {
                        print("\(topic.topic) \(topic.subscribers)")
                    }
                }
                guard page.count == 1000, let last = page.last else { break }
                after = last.topic
            }
        }
    }
}

/// Lines of a file or standard input, without their newline.
final class LineReader {
    private let file: UnsafeMutablePointer<FILE>
    private let ownsFile: Bool
    private var line: UnsafeMutablePointer<CChar>?
    private var capacity = 0

    init?(path: String) {
        guard let file = path == "-" ? fdopen(0, "r") : fopen(path, "r") else { return nil }
        self.file = file
        self.ownsFile = path != "-"
    }

    deinit {
        free(self.line)
        if self.ownsFile { fclose(self.file) }
    }

    func next() -> String? {
        let count = getline(&self.line, &self.capacity, self.file)
        guard count >= 0, let line = self.line else { return nil }
        let bytes = UnsafeRawBufferPointer(start: line, count: count)
        var text = String(decoding: bytes, as: UTF8.self)
        while text.hasSuffix("\n") || text.hasSuffix("\r") { text.removeLast() }
        return text
    }
}
