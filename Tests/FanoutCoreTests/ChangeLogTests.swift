@testable import FanoutCore
import FanoutTestSupport
import Testing

/// The engine over the change-log seam, with an in-memory log that acknowledges only when the test
/// says so: what the engine logs, in which order, and that nothing is answered or handed out before
/// the log acknowledges it.
@Suite("Change log seam")
struct ChangeLogTests {
    static let request = RegistrationRequest(token: RegistrationToken("phone"), platform: .android, appID: AppID("1:1:android:a")!)

    @Test func theEngineLogsEachChangeInOrderAndWaitsForTheLog() async throws {
        let log = InMemoryChangeLog(acknowledgement: .manual)
        let engine = Engine(log: log, clock: ManualClock())
        let setUp = engine.apply { (changes: inout Engine.Changes) throws(FanoutError) -> Installation in
            let installation = try changes.register(Self.request).installation
            try changes.subscribe([installation.fid.string].addresses, to: TopicName("news")!)
            return installation
        }
        #expect(!setUp.isDurable)
        #expect(log.records.count == 2)
        // Reads see applied changes at once; the log has not acknowledged them.
        #expect(try engine.subscriberCount(of: TopicName("news")!) == 1)
        log.acknowledge(through: 2)
        let installation = try await setUp.durable()

        let device = try engine.attachConsumer(.installations([.fid(installation.fid)]), credit: 10)
        let sent = engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in
            try changes.send(Array(#"{"message":{"topic":"news","data":{"k":"v"}}}"#.utf8))
        }
        #expect(device.poll().isEmpty, "not handed out before the log acknowledges the send")
        log.acknowledge(through: 3)
        #expect(device.poll().count == 1, "handed out by the acknowledgement itself")
        #expect(try await sent.durable().enqueued == 1)

        guard case .register(.default, let registered) = log.records[0],
            case .subscribe(.default, let topic, let installations) = log.records[1],
            case .send(.default, let sequence, let message) = log.records[2], case .topic(let sentTo) = message.target
        else {
            Issue.record("unexpected records \(log.records)")
            return
        }
        #expect(registered.fid == installation.fid && topic.value == "news" && installations == [SlotReference(slot: installation.slot, fid: installation.fid)] && sequence == 1 && sentTo == topic)
    }

    /// A change that does not change anything (a repeated registration) logs nothing and has
    /// nothing to wait for.
    @Test func aChangeThatChangesNothingLogsNothing() async throws {
        let log = InMemoryChangeLog(acknowledgement: .manual)
        let engine = Engine(log: log, clock: ManualClock())
        let first = engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in try changes.register(Self.request) }
        log.acknowledge(through: 1)
        let fid = try await first.durable().installation.fid
        let again = engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in
            try changes.register(RegistrationRequest(offeredFID: fid.string, token: RegistrationToken("phone"), platform: .android, appID: AppID("1:1:android:a")!))
        }
        #expect(again.isDurable)
        #expect(try await again.durable().isExisting)
        #expect(log.records.count == 1)
    }
}
