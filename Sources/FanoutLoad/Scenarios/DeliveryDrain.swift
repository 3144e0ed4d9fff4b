import FanoutClient
import FanoutCore
import FanoutWire

/// Consumer connections that take fanout's deliveries as they arrive and acknowledge each batch
/// with one ACK, as delivery workers do (platform workers spread over the three platforms). A
/// worker does not wait for an ACK's reply before taking the next batch: up to
/// `acknowledgementsInFlight` ACKs are pipelined per connection (the server gives the credit back
/// when it applies an ACK, and answers once it is durable).
final class DeliveryDrain: Sendable {
    private let admin: FanoutClient
    private let consumers: [(client: FanoutClient, stream: DeliveryStream)]
    private let acknowledged = Counter()
    static let acknowledgementsInFlight = 8

    private init(admin: FanoutClient, consumers: [(client: FanoutClient, stream: DeliveryStream)]) {
        self.admin = admin
        self.consumers = consumers
    }

    static func attach(count: Int, host: String, port: Int, adminKey: String, consumerKey: String, tls: FanoutClient.TLS? = nil) async throws -> DeliveryDrain {
        let platforms: [Platform] = [.android, .ios, .web]
        var consumers: [(FanoutClient, DeliveryStream)] = []
        for index in 0..<max(1, count) {
            let client = try await FanoutClient.connect(host: host, port: port, apiKey: consumerKey, role: .consumer, tls: tls, clientName: "fanout-load consumer")
            consumers.append((client, try await client.attach(.platform(platforms[index % platforms.count]), credit: 4096)))
        }
        let admin = try await FanoutClient.connect(host: host, port: port, apiKey: adminKey, tls: tls, clientName: "fanout-load")
        return DeliveryDrain(admin: admin, consumers: consumers)
    }

    /// Takes and acknowledges deliveries until the streams end (after `finish`); each ACK's round
    /// trip is recorded with the batch size as its items.
    func run() async -> PhaseRecorder {
        await withTaskGroup(of: PhaseRecorder.self) { group in
            for (client, stream) in self.consumers {
                group.addTask {
                    await withTaskGroup(of: (Duration, Result<Int, any Error>).self) { acknowledgements in
                        var recorder = PhaseRecorder()
                        func record(_ outcome: (Duration, Result<Int, any Error>)) {
                            switch outcome.1 {
                            case .success(let count):
                                recorder.record(outcome.0, items: count)
                                self.acknowledged.add(count)
                            case .failure(let error):
                                recorder.record(outcome.0, error: error)
                            }
                        }
                        var inFlight = 0
                        while true {
                            let batch: [WireDelivery]
                            do {
                                batch = try await stream.nextBatch()
                            } catch {
                                break
                            }
                            if batch.isEmpty { break }
                            let ids = batch.map(\.id)
                            acknowledgements.addTask {
                                let start = ContinuousClock.now
                                do {
                                    let count = try await client.acknowledge(ids)
                                    return (ContinuousClock.now - start, .success(count))
                                } catch {
                                    return (ContinuousClock.now - start, .failure(error))
                                }
                            }
                            inFlight += 1
                            if inFlight >= Self.acknowledgementsInFlight, let outcome = await acknowledgements.next() {
                                inFlight -= 1
                                record(outcome)
                            }
                        }
                        for await outcome in acknowledgements { record(outcome) }
                        return recorder
                    }
                }
            }
            var merged = PhaseRecorder()
            for await recorder in group {
                merged.merge(recorder)
            }
            return merged
        }
    }

    var acknowledgedCount: Int { self.acknowledged.current }

    /// Waits until nothing is pending on the server (polling its statistics), or the timeout.
    func waitUntilDrained(timeout: Duration) async throws {
        let start = ContinuousClock.now
        while true {
            do {
                if try await self.admin.statistics().deliveries.pending == 0 { return }
            } catch let error as FanoutError where error.code == .unavailable {
                // Refused for a moment (a cluster's shard between owners): asked again.
            }
            guard ContinuousClock.now - start < timeout else {
                throw LoadError("deliveries were still pending after \(timeout)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Ends the consumers' attachments: each stream ends, and `run` returns once the
    /// acknowledgements still in flight are answered (the ACKs' replies wait for the log, a
    /// DETACH's does not: closing the connections before `run` returned failed an ACK now and then).
    func detach() async {
        for (client, _) in self.consumers {
            try? await client.detach()
        }
    }

    /// Closes the connections, after `detach` and `run`.
    func close() async {
        for (client, _) in self.consumers {
            try? await client.close()
        }
        try? await self.admin.close()
    }
}
