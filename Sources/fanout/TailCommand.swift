import ArgumentParser
import FanoutClient
import FanoutCore
import FanoutWire

struct TailCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tail",
        abstract: "Attach as a consumer and print deliveries as they arrive, acknowledging each.",
        discussion: """
            A worker for a platform (--platform) or a device consumer of installations \
            (--registration, repeatable). One line per delivery: id, message id, platform, FID, \
            payload. Stops after --count deliveries, or on Ctrl-C.
            """
    )
    @OptionGroup var server: ServerOptions
    @Option(help: "Consume a platform's deliveries as a worker: android, ios or web.") var platform: String?
    @Option(help: "Consume these installations' deliveries (FID or token).") var registration: [String] = []
    @Option(help: "Unacknowledged deliveries to hold at most.") var credit = 100
    @Option(help: "Stop after this many deliveries.") var count: Int?
    @Flag(name: .customLong("no-ack"), help: "Do not acknowledge (they are delivered again later).") var noAcknowledge = false
    @Flag(help: "Connect with the consumer role (for consumer keys).") var consumer = false

    func run() async throws {
        let scope: AttachScope
        if let platform = self.platform {
            guard let platform = Platform(rawValue: platform), self.registration.isEmpty else {
                throw ValidationError("give either --platform android|ios|web or --registration")
            }
            scope = .platform(platform)
        } else if !self.registration.isEmpty {
            scope = .installations(self.registration)
        } else {
            throw ValidationError("give --platform or --registration")
        }
        try await self.server.withClient(command: "tail", role: self.consumer ? .consumer : .admin) { client in
            let deliveries = try await client.attach(scope, credit: self.credit, in: self.server.project)
            var received = 0
            while true {
                // What has arrived, up to --count, acknowledged with one ACK.
                let batch = try await deliveries.nextBatch(maximum: self.count.map { $0 - received } ?? .max)
                if batch.isEmpty { break }
                batch.forEach(self.print)
                if !self.noAcknowledge {
                    try await client.acknowledge(batch.map(\.id))
                }
                received += batch.count
                if let count = self.count, received >= count { break }
            }
        }
    }

    private func print(_ delivery: WireDelivery) {
        let messageID = "projects/\(self.server.project)/messages/\(delivery.id.messageSequence)"
        let payload = String(decoding: delivery.payload, as: UTF8.self)
        if self.server.json {
            printJSON(.object(JSONObject([
                .init(key: "id", value: .string(delivery.id.description)),
                .init(key: "message", value: .string(messageID)),
                .init(key: "platform", value: .string(delivery.platform.rawValue)),
                .init(key: "fid", value: .string(delivery.fid.string)),
                .init(key: "expiry", value: jsonNumber(Int(delivery.expiry.millisecondsSinceEpoch))),
                .init(key: "deletedMessages", value: .bool(delivery.isDeletedMessagesMarker)),
                .init(key: "payload", value: .string(payload)),
            ])))
        } else {
            Swift.print("\(delivery.id) \(messageID) \(delivery.platform) \(delivery.fid) \(payload)")
        }
    }
}
