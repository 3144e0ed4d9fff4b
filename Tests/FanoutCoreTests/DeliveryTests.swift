import FanoutCore
import FanoutTestSupport
import Foundation
import Testing

/// Sends, mailboxes and consumers, one rule at a time (fcm-rules.md section 5), with the clock
/// moved by the tests.
@Suite("Deliveries")
struct DeliveryTests {
    let clock = ManualClock()
    let engine: Engine

    init() {
        self.engine = Engine(clock: self.clock)
    }

    private var tokenCounter = Counter()

    private func register(_ platform: Platform = .android, token: String? = nil) async throws -> Installation {
        let token = token ?? "token-\(platform)-\(self.tokenCounter.next())"
        return try await self.engine.register(
            RegistrationRequest(
                token: RegistrationToken(token)!,
                platform: platform,
                appID: AppID("1:1065473598624:\(platform):d7820756")!
            )
        ).installation
    }

    private func send(_ message: String) async throws -> SendResult {
        try await self.engine.send(Array(#"{"message":\#(message)}"#.utf8))
    }

    private func toFID(_ installation: Installation, _ extra: String = "") async throws -> SendResult {
        try await self.send(#"{"fid":"\#(installation.fid.string)","data":{"k":"v"}\#(extra)}"#)
    }

    private func pending(_ installation: Installation) throws -> [Delivery] {
        try self.engine.pendingDeliveries(for: .fid(installation.fid))
    }

    // MARK: - Sends

    @Test func sendToTokenEnqueuesOneDeliveryWithThePlatformPayload() async throws {
        let phone = try await self.register(.ios)
        let result = try await self.send(#"{"token":"\#(phone.token!.value)","notification":{"title":"Hi"}}"#)
        #expect(result.messageID == "projects/default/messages/1")
        #expect(result.audience == 1 && result.enqueued == 1)
        #expect(result.recipients == [.ok])
        let deliveries = try self.pending(phone)
        #expect(deliveries.count == 1)
        let delivery = try #require(deliveries.first)
        #expect(delivery.id == DeliveryID(messageSequence: 1, slot: phone.slot))
        #expect(delivery.messageID == result.messageID)
        #expect(delivery.payload == delivery.message?.apnsBody)
        let body = try #require(try JSONSerialization.jsonObject(with: Data(delivery.payload)) as? [String: Any])
        #expect(((body["aps"] as? [String: Any])?["alert"] as? [String: Any])?["title"] as? String == "Hi")
    }

    @Test func unknownDeletedAndRotatedAwayRecipientsAreUnregistered() async throws {
        let kept = try await self.register()
        let deleted = try await self.register()
        let rotated = try await self.register()
        try await self.engine.deleteInstallation(deleted.fid)
        _ = try await self.engine.refreshToken(.fid(rotated.fid), to: RegistrationToken("fresh-token")!)
        for token in ["never-registered", deleted.token!.value, rotated.token!.value] {
            let result = try await self.send(#"{"token":"\#(token)","data":{"k":"v"}}"#)
            #expect(result.recipients.map(\.code) == [.unregistered])
            #expect(result.recipients == [.failed(FanoutError(.unregistered, "", field: "message.token"))])
            #expect(result.enqueued == 0)
        }
        await #expect(try self.toFID(deleted).recipients == [.failed(FanoutError(.unregistered, "", field: "message.fid"))])
        let multicast = try await self.send(
            #"{"tokens":["\#(kept.token!.value)","unknown","fresh-token"],"fids":["\#(deleted.fid.string)"],"data":{"k":"v"}}"#
        )
        #expect(multicast.recipients == [
            .ok, .failed(FanoutError(.unregistered, "", field: "message.tokens[1]")), .ok,
            .failed(FanoutError(.unregistered, "", field: "message.fids[0]")),
        ])
        #expect(multicast.audience == 2)
    }

    @Test func oversizedPlatformPayloadIsRefusedOnlyForThatPlatform() async throws {
        let android = try await self.register(.android)
        let ios = try await self.register(.ios)
        // 3000 bytes of data are within FCM's 4096, but the APNs body would not fit once apns.payload adds 2000 more.
        let big = String(repeating: "x", count: 3000)
        let padding = String(repeating: "y", count: 2000)
        let result = try await self.send(
            #"{"tokens":["\#(android.token!.value)","\#(ios.token!.value)"],"data":{"big":"\#(big)"},"apns":{"payload":{"pad":"\#(padding)"}}}"#
        )
        #expect(result.recipients == [.ok, .failed(FanoutError(.invalidArgument, "", field: "message.tokens[1]"))])
        guard case .failed(let refusal) = result.recipients[1] else { return }
        let iosSize = result.platforms[1].renderedBytes
        #expect(iosSize > 4096)
        #expect(refusal.message == "Message too big: the rendered ios payload is \(iosSize) bytes, over its limit of 4096 bytes")
        #expect(refusal.violations == [FieldViolation(field: "message.apns", description: refusal.message)])
        #expect(result.platforms.map(\.platform) == [.android, .ios, .web])
        #expect(result.platforms.map(\.audience) == [1, 1, 0])
        #expect(result.platforms.map(\.enqueued) == [1, 0, 0])
        #expect(result.platforms.map(\.refused) == [0, 1, 0])
        #expect(result.platforms[1].limit == 4096 && result.platforms[0].limit == nil)
        #expect(try self.pending(android).count == 1)
        #expect(try self.pending(ios).isEmpty)
        #expect(try self.engine.deliveryStatistics().rejected == 1)
    }

    @Test func topicConditionAndUserTargetsReachTheirAudience() async throws {
        let a = try await self.register()
        let b = try await self.register(.web)
        let c = try await self.register(.ios)
        _ = try await self.engine.subscribe([a.fid.string, b.fid.string].addresses, to: TopicName("news")!)
        _ = try await self.engine.subscribe([b.fid.string, c.fid.string].addresses, to: TopicName("sport")!)
        try await self.engine.bindDevice(.fid(c.fid), to: UserID("alice")!)
        #expect(try await self.send(#"{"topic":"news","data":{"k":"v"}}"#).enqueued == 2)
        #expect(try await self.send(#"{"condition":"'news' in topics && !('sport' in topics)","data":{"k":"v"}}"#).enqueued == 1)
        #expect(try await self.send(#"{"user":"alice","data":{"k":"v"}}"#).enqueued == 1)
        let empty = try await self.send(#"{"topic":"nobody","data":{"k":"v"}}"#)
        #expect(empty.audience == 0 && empty.recipients.isEmpty)
        #expect(try self.pending(a).map(\.id.messageSequence) == [1, 2])
        #expect(try self.pending(b).map(\.id.messageSequence) == [1])
        #expect(try self.pending(c).map(\.id.messageSequence) == [3])
    }

    @Test func validateOnlyResolvesAndChangesNothing() async throws {
        let a = try await self.register()
        let result = try await self.engine.send(Array(#"{"validate_only":true,"message":{"token":"\#(a.token!.value)","data":{"k":"v"}}}"#.utf8))
        #expect(result.messageID == "projects/default/messages/fake_message_id")
        #expect(try self.pending(a).isEmpty)
        #expect(try self.engine.deliveryStatistics() == DeliveryStatistics())
        await #expect(try self.toFID(a).sequence == 1)
    }

    @Test func invalidMessagesAreRefusedWithEveryViolation() async throws {
        let error = try await #require(throws: FanoutError.self) {
            try await self.send(#"{"topic":"news","data":{"from":"x"},"android":{"ttl":"-1s"}}"#)
        }
        #expect(error.code == .invalidArgument)
        #expect(Set(error.violations.map(\.field)) == ["message.data.from", "message.android.ttl"])
    }

    // MARK: - Mailbox rules

    @Test func deliveriesExpireWithTheirTTL() async throws {
        let a = try await self.register()
        let ios = try await self.register(.ios)
        _ = try await self.toFID(a, #","android":{"ttl":"60s"}"#)
        _ = try await self.toFID(a)
        _ = try await self.send(#"{"fid":"\#(ios.fid.string)","data":{"k":"v"},"apns":{"headers":{"apns-expiration":"\#(self.clock.now().millisecondsSinceEpoch / 1000 + 120)","apns-priority":"5"}}}"#)
        self.clock.advance(by: .seconds(59))
        #expect(try await self.engine.expireDeliveries() == 0)
        self.clock.advance(by: .seconds(1))
        // Expired but not yet swept: no longer listed.
        #expect(try self.pending(a).map(\.id.messageSequence) == [2])
        #expect(try await self.engine.expireDeliveries() == 1)
        #expect(try self.pending(ios).count == 1)
        self.clock.advance(by: .seconds(60))
        #expect(try await self.engine.expireDeliveries() == 1)
        #expect(try self.pending(ios).isEmpty)
        let statistics = try self.engine.deliveryStatistics()
        #expect(statistics.expired == 2 && statistics.pending == 1 && statistics.messages == 1)
    }

    @Test func ttlZeroGoesOnlyToAConsumerAttachedNow() async throws {
        let a = try await self.register()
        _ = try await self.toFID(a, #","android":{"ttl":"0s"}"#)
        #expect(try self.pending(a).isEmpty)
        #expect(try self.engine.deliveryStatistics().expired == 1)
        let consumer = try self.engine.attachConsumer(.installations([.fid(a.fid)]), credit: 1)
        #expect(consumer.poll().isEmpty)
        _ = try await self.toFID(a, #","android":{"ttl":"0s"}"#)
        let received = consumer.poll()
        #expect(received.map(\.id.messageSequence) == [2])
        // No credit left: the next one is dropped, not queued.
        _ = try await self.toFID(a, #","android":{"ttl":"0s"}"#)
        #expect(consumer.poll().isEmpty)
        #expect(try await consumer.acknowledge(received.map(\.id)) == 1)
        #expect(try self.engine.deliveryStatistics().expired == 2)
    }

    @Test func aCollapsibleMessageReplacesTheOneWithItsKey() async throws {
        let a = try await self.register()
        _ = try await self.toFID(a, #","android":{"collapse_key":"score"}"#)
        _ = try await self.toFID(a)
        _ = try await self.toFID(a, #","android":{"collapse_key":"score"}"#)
        #expect(try self.pending(a).map(\.id.messageSequence) == [2, 3])
        #expect(try self.engine.deliveryStatistics().collapsed == 1)
        #expect(try self.engine.deliveryStatistics().messages == 2)
    }

    @Test func aFifthCollapseKeyEvictsTheOldest() async throws {
        let a = try await self.register()
        for key in ["k1", "k2", "k3", "k4"] {
            _ = try await self.toFID(a, #","android":{"collapse_key":"\#(key)"}"#)
        }
        _ = try await self.toFID(a)
        _ = try await self.toFID(a, #","android":{"collapse_key":"k5"}"#)
        #expect(try self.pending(a).map(\.id.messageSequence) == [2, 3, 4, 5, 6])
        _ = try await self.toFID(a, #","android":{"collapse_key":"k3"}"#)
        #expect(try self.pending(a).map(\.id.messageSequence) == [2, 4, 5, 6, 7])
        #expect(try self.engine.deliveryStatistics().collapsed == 2)
    }

    @Test func moreThan100PendingDropsThemAllForOneMarker() async throws {
        let a = try await self.register()
        _ = try await self.toFID(a, #","android":{"collapse_key":"keep"}"#)
        for _ in 0..<100 { _ = try await self.toFID(a) }
        #expect(try self.pending(a).count == 101)
        _ = try await self.toFID(a)
        let left = try self.pending(a)
        #expect(left.map(\.id.messageSequence) == [1, 102 | DeliveryID.markerBit])
        #expect(left[1].isDeletedMessagesMarker && left[1].id.isDeletedMessagesMarker)
        #expect(left[1].messageID == nil, "the marker is no message: an id of its own, not message 102's")
        #expect(left[1].payload == Delivery.deletedMessagesPayload)
        #expect(try self.engine.deliveryStatistics().dropped == 101)
        // The count starts again; a second overflow does not queue a second marker.
        for _ in 0..<101 { _ = try await self.toFID(a) }
        #expect(try self.pending(a).filter(\.isDeletedMessagesMarker).count == 1)
        #expect(try self.pending(a).count == 2)
        #expect(try self.engine.deliveryStatistics().messages == 2)

        // A consumer acknowledges the marker by its own id, and only it goes.
        let consumer = try self.engine.attachConsumer(.installations([.fid(a.fid)]), credit: 10)
        let held = consumer.poll()
        #expect(held.map(\.id) == left.map(\.id))
        #expect(try await consumer.acknowledge([DeliveryID(messageSequence: 102, slot: a.slot)]) == 0, "message 102's id is not the marker's")
        #expect(try await consumer.acknowledge([left[1].id]) == 1)
        #expect(try self.pending(a).map(\.id) == [left[0].id])
    }

    @Test func deletionDropsTheMailboxAndRotationKeepsIt() async throws {
        let a = try await self.register()
        let b = try await self.register()
        _ = try await self.toFID(a)
        _ = try await self.toFID(b)
        _ = try await self.engine.refreshToken(.fid(a.fid), to: RegistrationToken("rotated")!)
        #expect(try self.pending(a).count == 1)
        try await self.engine.deleteInstallation(b.fid)
        #expect(try self.engine.deliveryStatistics().dropped == 1)
        #expect(try self.engine.deliveryStatistics().messages == 1)
        // The freed slot's next holder starts with an empty mailbox.
        let c = try await self.register()
        #expect(c.slot == b.slot)
        #expect(try self.pending(c).isEmpty)
    }

    @Test func expiredInstallationsLoseTheirMailbox() async throws {
        let a = try await self.register()
        _ = try await self.toFID(a)
        self.clock.advance(by: .seconds(271 * 86_400))
        #expect(try await self.engine.pruneExpiredInstallations().count == 1)
        #expect(try self.engine.deliveryStatistics().pending == 0)
    }

    // MARK: - Consumers

    /// A delivery a consumer took keeps its token and message when the engine lets go of both:
    /// the installation deleted (its mailbox and the message's entry with it), and the arena chunk
    /// its token was in evacuated and freed, its memory reused by the tokens registered after.
    /// (The delivery reads the token in place: its hand-out holds the chunk.)
    @Test func aTakenDeliveryOutlivesItsInstallationMessageAndTokenChunk() async throws {
        let worker = try self.engine.attachConsumer(.platform(.android), credit: 10)
        // 4,000-byte tokens: about 260 to a 1 MiB chunk.
        func longToken(_ number: Int) -> String { "long-\(number)-" + String(repeating: "x", count: 4000) }
        var installations: [Installation] = []
        for number in 0..<300 { installations.append(try await self.register(token: longToken(number))) }
        let recipient = installations[5]
        let sent = try await self.toFID(recipient)
        let taken = worker.poll()
        try #require(taken.count == 1)
        for installation in installations.prefix(250) { _ = try await self.engine.deleteInstallation(installation.fid) }
        for number in 300..<600 { _ = try await self.register(token: longToken(number)) }
        #expect(try self.engine.deliveryStatistics().messages == 0)
        #expect(taken[0].token == recipient.token)
        #expect(taken[0].messageID == sent.messageID)
        #expect(taken[0].payload == Array(#"{"data":{"k":"v"}}"#.utf8))
    }

    @Test func aConsumerGetsTheBacklogThenNewDeliveriesAndAcknowledges() async throws {
        let a = try await self.register()
        _ = try await self.toFID(a)
        let consumer = try self.engine.attachConsumer(.installations([.fid(a.fid)]), credit: 10)
        let first = await consumer.next()
        #expect(first?.id.messageSequence == 1)
        _ = try await self.toFID(a)
        let second = await consumer.next()
        #expect(second?.id.messageSequence == 2)
        #expect(try await consumer.acknowledge([first!.id, second!.id]) == 2)
        #expect(try self.pending(a).isEmpty)
        #expect(try await consumer.acknowledge([first!.id]) == 0)
        let statistics = try self.engine.deliveryStatistics()
        #expect(statistics.delivered == 2 && statistics.acknowledged == 2 && statistics.messages == 0)
        consumer.detach()
        #expect(await consumer.next() == nil)
        await #expect(throws: FanoutError.self) { try await consumer.acknowledge([first!.id]) }
    }

    /// An ACK counts only what its consumer holds: another consumer's delivery, one not handed
    /// out yet and one named twice are ignored, and stay as they were.
    @Test func anAcknowledgementOfWhatTheConsumerDoesNotHoldIsIgnored() async throws {
        let a = try await self.register()
        let b = try await self.register()
        _ = try await self.toFID(a)
        let waiting = try await self.toFID(a)
        _ = try await self.toFID(b)
        let forA = try self.engine.attachConsumer(.installations([.fid(a.fid)]), credit: 1)
        let forB = try self.engine.attachConsumer(.installations([.fid(b.fid)]), credit: 10)
        let heldByA = try #require(forA.poll().first)
        let heldByB = try #require(forB.poll().first)
        let notHandedOut = DeliveryID(messageSequence: waiting.sequence, slot: a.slot)
        #expect(try await forA.acknowledge([heldByB.id, notHandedOut]) == 0)
        #expect(try self.pending(b).map(\.isInFlight) == [true])
        #expect(try self.pending(a).map(\.isInFlight) == [true, false])
        #expect(try await forA.acknowledge([heldByA.id, heldByA.id, heldByB.id]) == 1)
        #expect(try await forB.acknowledge([heldByB.id]) == 1)
        #expect(try self.engine.deliveryStatistics().acknowledged == 2)
    }

    @Test func unacknowledgedDeliveriesAreRedeliveredAfterDetach() async throws {
        let a = try await self.register()
        _ = try await self.toFID(a)
        _ = try await self.toFID(a)
        let first = try self.engine.attachConsumer(.installations([.fid(a.fid)]), credit: 10)
        let received = first.poll()
        #expect(received.count == 2)
        _ = try await first.acknowledge([received[0].id])
        #expect(try self.pending(a).map(\.isInFlight) == [true])
        first.detach()
        #expect(try self.pending(a).map(\.isInFlight) == [false])
        let second = try self.engine.attachConsumer(.installations([.fid(a.fid)]), credit: 10)
        #expect(second.poll().map(\.id) == [received[1].id])
        #expect(try self.engine.deliveryStatistics().delivered == 3)
    }

    @Test func creditBoundsWhatAConsumerHolds() async throws {
        let a = try await self.register()
        for _ in 0..<5 { _ = try await self.toFID(a) }
        let consumer = try self.engine.attachConsumer(.installations([.fid(a.fid)]), credit: 2)
        let firstTwo = consumer.poll()
        #expect(firstTwo.map(\.id.messageSequence) == [1, 2])
        _ = try await consumer.acknowledge([firstTwo[0].id])
        #expect(consumer.poll().map(\.id.messageSequence) == [3])
        try consumer.grant(2)
        #expect(consumer.poll().map(\.id.messageSequence) == [4, 5])
        #expect(throws: FanoutError.self) { try consumer.grant(0) }
        #expect(throws: FanoutError.self) { try consumer.grant(Int.max) }
        #expect(throws: FanoutError.self) { try self.engine.attachConsumer(.platform(.ios), credit: 0) }
    }

    @Test func workersShareAPlatformAndDevicesTakeTheirOwn() async throws {
        var android: [Installation] = []
        for _ in 0..<4 { android.append(try await self.register(.android)) }
        let ios = try await self.register(.ios)
        let device = try self.engine.attachConsumer(.installations([.fid(android[0].fid)]), credit: 100)
        let workerA = try self.engine.attachConsumer(.platform(.android), credit: 100)
        let workerB = try self.engine.attachConsumer(.platform(.android), credit: 100)
        let iosWorker = try self.engine.attachConsumer(.platform(.ios), credit: 100)
        for installation in android + [ios] { _ = try await self.toFID(installation) }
        #expect(device.poll().map(\.id.slot) == [android[0].slot])
        let workerSlots = (workerA.poll() + workerB.poll()).map(\.id.slot).sorted()
        #expect(workerSlots == android.dropFirst().map(\.slot).sorted())
        #expect(iosWorker.poll().map(\.id.slot) == [ios.slot])
        // The device leaves without acknowledging: its delivery goes to a worker.
        device.detach()
        #expect((workerA.poll() + workerB.poll()).map(\.id.slot) == [android[0].slot])
    }

    /// A device consumer whose installation another device consumer takes gets back the credit
    /// of what it held there, and is filled from its other installations at once, even when what
    /// it held had left the mailbox (collapsed while held).
    @Test func aDeviceConsumerThatLosesAnInstallationIsFilledFromItsOthers() async throws {
        let a = try await self.register()
        let b = try await self.register()
        _ = try await self.toFID(a, #","android":{"collapse_key":"k"}"#)
        let first = try self.engine.attachConsumer(.installations([.fid(a.fid), .fid(b.fid)]), credit: 1)
        #expect(first.poll().map(\.id.slot) == [a.slot])
        let replacement = try await self.toFID(a, #","android":{"collapse_key":"k"}"#)
        let waiting = try await self.toFID(b)
        #expect(first.poll().isEmpty, "the collapsed delivery still takes the credit until it is acknowledged")
        let second = try self.engine.attachConsumer(.installations([.fid(a.fid)]), credit: 1)
        #expect(second.poll().map(\.id) == [DeliveryID(messageSequence: replacement.sequence, slot: a.slot)])
        #expect(first.poll().map(\.id) == [DeliveryID(messageSequence: waiting.sequence, slot: b.slot)])
    }

    /// An installation deleted while its slot waits in its platform's ready queue, and the slot
    /// taken by an installation of another platform: the new one's deliveries reach that
    /// platform's workers without waiting for the old platform's.
    @Test func aSlotTakenOverByAnotherPlatformJoinsThatPlatformsQueue() async throws {
        let busy = try await self.register(.ios)
        let gone = try await self.register(.ios)
        let iosWorker = try self.engine.attachConsumer(.platform(.ios), credit: 1)
        _ = try await self.toFID(busy)
        _ = try await self.toFID(gone)
        #expect(iosWorker.poll().map(\.id.slot) == [busy.slot])
        let androidWorker = try self.engine.attachConsumer(.platform(.android), credit: 10)
        _ = try await self.engine.deleteInstallation(gone.fid)
        let reused = try await self.register(.android)
        try #require(reused.slot == gone.slot, "the freed slot is reused")
        _ = try await self.toFID(reused)
        #expect(androidWorker.poll().map(\.id.slot) == [reused.slot])
        #expect(iosWorker.poll().isEmpty)
    }

    @Test func aWorkerAttachingLaterGetsTheBacklog() async throws {
        var installations: [Installation] = []
        for _ in 0..<3 { installations.append(try await self.register(.web)) }
        for installation in installations { _ = try await self.toFID(installation) }
        let worker = try self.engine.attachConsumer(.platform(.web), credit: 2)
        let first = worker.poll()
        #expect(first.count == 2)
        _ = try await worker.acknowledge(first.map(\.id))
        #expect(worker.poll().count == 1)
    }
}

/// A counter for unique test tokens (the suite struct is immutable).
final class Counter: @unchecked Sendable {
    private var value = 0
    func next() -> Int {
        self.value += 1
        return self.value
    }
}
