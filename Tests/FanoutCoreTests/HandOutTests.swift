@testable import FanoutCore
import FanoutTestSupport
import Foundation
import Testing

/// A delivery reaches a consumer only once the send that made it is as durable as the engine's
/// durability says: a crash can then never lose a send whose deliveries a worker already pushed.
/// The log's syncs are held (a slow disk on demand) or failed while the tests look at the consumers.
@Suite("Hand-outs wait for the log", .serialized)
struct HandOutTests {
    static let message = Array(#"{"message":{"topic":"news","data":{"k":"v"}}}"#.utf8)

    static func subscribedInstallation(_ engine: Engine) async throws -> Installation {
        let installation = try await engine.register(
            RegistrationRequest(token: RegistrationToken("phone"), platform: .android, appID: AppID("1:1:android:a")!)
        ).installation
        try await engine.subscribe([installation.fid.string].addresses, to: TopicName("news")!)
        return installation
    }

    static func send(_ changes: inout Engine.Changes) throws(FanoutError) -> SendResult {
        try changes.send(Self.message)
    }

    @Test func aConsumerGetsADeliveryOnlyOnceItsSendIsSynced() async throws {
        try await TemporaryDirectory.with("fanout-handout") { directory in
            let engine = try Engine(directory: directory, durability: .always)
            let installation = try await Self.subscribedInstallation(engine)
            let device = try engine.attachConsumer(.installations([.fid(installation.fid)]), credit: 10)
            FileFaults.hold(.sync, pathContains: "\(directory)/segment-")
            let applied = engine.apply(Self.send)
            // Applied (the mailbox holds it, handed to the device) but not synced: not pushed yet.
            #expect(!applied.isDurable)
            #expect(try engine.pendingDeliveries(for: .fid(installation.fid)).map(\.isInFlight) == [true])
            #expect(device.poll().isEmpty)
            FileFaults.release(pathContains: "\(directory)/segment-")
            let sent = try await applied.durable()
            #expect(device.poll().map(\.id.messageSequence) == [sent.sequence])
            try engine.close()
        }
    }

    /// A worker attaching while a send waits for its sync gets that send's delivery in its backlog,
    /// and only after the sync.
    @Test func aBacklogWaitsForTheSyncOfItsSends() async throws {
        try await TemporaryDirectory.with("fanout-handout") { directory in
            let engine = try Engine(directory: directory, durability: .always)
            _ = try await Self.subscribedInstallation(engine)
            FileFaults.hold(.sync, pathContains: "\(directory)/segment-")
            let applied = engine.apply(Self.send)
            let worker = try engine.attachConsumer(.platform(.android), credit: 10)
            #expect(worker.poll().isEmpty)
            FileFaults.release(pathContains: "\(directory)/segment-")
            let sent = try await applied.durable()
            #expect(worker.poll().map(\.id.messageSequence) == [sent.sequence])
            try engine.close()
        }
    }

    /// An acknowledgement's refill hands out deliveries of sends already synced: it does not wait
    /// for the acknowledgement's own sync (the refilled delivery is still pending until it is
    /// acknowledged in turn, so a crash before that sync delivers both again).
    @Test func aRefillAfterAnAcknowledgementDoesNotWaitForItsSync() async throws {
        try await TemporaryDirectory.with("fanout-handout") { directory in
            let engine = try Engine(directory: directory, durability: .always)
            _ = try await Self.subscribedInstallation(engine)
            let worker = try engine.attachConsumer(.platform(.android), credit: 1)
            let first = try await engine.send(Self.message)
            let second = try await engine.send(Self.message)
            let received = worker.poll()
            #expect(received.map(\.id.messageSequence) == [first.sequence])
            FileFaults.hold(.sync, pathContains: "\(directory)/segment-")
            let acknowledged = engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in
                try changes.acknowledge(received.map(\.id), by: worker)
            }
            #expect(!acknowledged.isDurable)
            #expect(worker.poll().map(\.id.messageSequence) == [second.sequence])
            FileFaults.release(pathContains: "\(directory)/segment-")
            #expect(try await acknowledged.durable() == 1)
            try engine.close()
        }
    }

    /// A send the log refuses never reaches a consumer, and is not pending afterwards.
    @Test func aRefusedSendReachesNoConsumer() async throws {
        try await TemporaryDirectory.with("fanout-handout") { directory in
            let engine = try Engine(directory: directory, durability: .always, logRetryInterval: .milliseconds(5))
            let installation = try await Self.subscribedInstallation(engine)
            let device = try engine.attachConsumer(.installations([.fid(installation.fid)]), credit: 10)
            FileFaults.inject(.init(.sync, pathContains: "\(directory)/segment-", code: EIO))
            let applied = engine.apply(Self.send)
            await #expect(throws: FanoutError.self) { try await applied.durable() }
            FileFaults.clear(pathContains: "\(directory)/segment-")
            #expect(device.poll().isEmpty)
            #expect(await device.next() == nil, "the consumer was detached by the failure")
            #expect(try engine.pendingDeliveries(for: .fid(installation.fid)).isEmpty)
            // (The log may not have continued yet; closing then reports its failure.)
            try? engine.close()
        }
    }

    /// In memory there is no log to wait for: deliveries are pushed as soon as the change is made.
    @Test func inMemoryDeliveriesArePushedAtOnce() async throws {
        let engine = Engine()
        let installation = try await Self.subscribedInstallation(engine)
        let device = try engine.attachConsumer(.installations([.fid(installation.fid)]), credit: 10)
        let applied = engine.apply(Self.send)
        #expect(applied.isDurable)
        #expect(device.poll().count == 1)
    }
}
