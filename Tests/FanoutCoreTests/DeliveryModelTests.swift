import FanoutCore
import FanoutTestSupport
import Foundation
import Testing

/// Random sends (to FIDs, multicast and a topic; collapsible or not; TTL default, 60 s or 0),
/// device consumers that take, acknowledge and detach, clock moves and expiry sweeps, against a
/// plain model of FCM's mailbox rules. The durable variant closes and reopens the engine (and takes
/// snapshots): every pending delivery must come back, nothing acknowledged may.
@Suite("Deliveries against the reference model")
struct DeliveryModelTests {
    @Test(arguments: [11, 12, 13] as [UInt64])
    func inMemoryEngineMatchesModel(seed: UInt64) async throws {
        var harness = try DeliveryHarness(seed: seed, directory: nil)
        for _ in 0..<3000 { try await harness.step() }
        #expect(harness.model.maximumPendingSeen > 100, "the 100-pending rule was exercised")
        #expect(harness.exercised["collapse"]! > 0 && harness.exercised["marker"]! > 0 && harness.exercised["ttl0-taken"]! > 0)
    }

    @Test(arguments: [21, 22] as [UInt64])
    func reopenedEngineMatchesModel(seed: UInt64) async throws {
        let directory = TemporaryDirectory.path("fanout-delivery")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var harness = try DeliveryHarness(seed: seed, directory: directory)
        for step in 0..<2400 {
            try await harness.step()
            if step % 300 == 299 {
                if step % 600 == 599 { try harness.engine.snapshot() }
                try harness.reopen()
                try harness.compare()
            }
        }
        try harness.engine.close()
    }
}

struct DeliveryHarness {
    var random: SeededRandomNumberGenerator
    let clock = ManualClock()
    private(set) var engine: Engine
    let directory: String?
    var model = MailboxModel()
    var fids: [FID] = []
    var subscribers: Set<FID> = []
    var consumers: [FID: DeliveryConsumer] = [:]
    var sequence: UInt64 = 0
    var registered = 0
    var exercised: [String: Int] { self.model.exercised }

    init(seed: UInt64, directory: String?) throws {
        self.random = SeededRandomNumberGenerator(seed: seed)
        self.directory = directory
        if let directory {
            self.engine = try Engine(directory: directory, durability: .none, clock: self.clock)
        } else {
            self.engine = Engine(clock: self.clock)
        }
    }

    mutating func reopen() throws {
        guard let directory else { return }
        self.consumers = [:]
        let slots = try self.fids.map { try self.slot($0) }
        try self.engine.close()
        self.engine = try Engine(directory: directory, durability: .none, clock: self.clock)
        self.model.restart()
        // Installations keep their slots, so delivery ids mean the same after a restart.
        #expect(try self.fids.map { try self.slot($0) } == slots)
    }

    var now: Int64 { self.clock.now().millisecondsSinceEpoch }

    mutating func step() async throws {
        let roll = Int.random(in: 0..<100, using: &self.random)
        switch roll {
        case 0..<6 where self.fids.count < 14, 0..<2:
            let platform = Platform.allCases.randomElement(using: &self.random)!
            self.registered += 1
            let token = RegistrationToken("device-\(self.registered)")
            // The FID from the seed too: FIDs order the consumers' choices, so random ones made the run differ each time.
            let offered = FID.make(fromRandomBytes: (0..<17).map { _ in UInt8.random(in: 0...255, using: &self.random) })
            let installation = try await self.engine.register(RegistrationRequest(offeredFID: offered.string, token: token, platform: platform, appID: AppID("app")!)).installation
            self.fids.append(installation.fid)
            self.model.installations[installation.fid] = .init(fid: installation.fid, platform: platform)
            if Bool.random(using: &self.random) {
                _ = try await self.engine.subscribe([installation.fid.string].addresses, to: TopicName("t")!)
                self.subscribers.insert(installation.fid)
            }
        case 6..<8 where self.fids.count > 4:
            let fid = self.fids.remove(at: Int.random(in: 0..<self.fids.count, using: &self.random))
            self.consumers[fid] = nil
            try await self.engine.deleteInstallation(fid)
            self.model.installations[fid] = nil
            self.subscribers.remove(fid)
        case 8..<60 where !self.fids.isEmpty:
            try await self.send()
        case 60..<70 where !self.fids.isEmpty:
            let fid = self.fids.randomElement(using: &self.random)!
            if self.consumers[fid] == nil {
                let credit = Int.random(in: 1...5, using: &self.random)
                self.consumers[fid] = try self.engine.attachConsumer(.installations([.fid(fid)]), credit: credit)
                self.model.attach(fid, credit: credit, now: self.now)
            } else {
                self.consumers[fid]!.detach()
                self.consumers[fid] = nil
                self.model.detach(fid)
            }
        case 70..<85 where !self.consumers.isEmpty:
            let fid = self.consumers.keys.sorted { $0.string < $1.string }.randomElement(using: &self.random)!
            let held = self.model.installations[fid]!.consumer!.held.sorted()
            let acknowledged = held.filter { _ in Bool.random(using: &self.random) }
            // A marker is acknowledged by its own id.
            let items = self.model.installations[fid]!.items
            let slot = try self.slot(fid)
            _ = try await self.consumers[fid]!.acknowledge(acknowledged.map { sequence in
                items.first { $0.sequence == sequence }?.isMarker == true
                    ? DeliveryID(markerOf: sequence, slot: slot) : DeliveryID(messageSequence: sequence, slot: slot)
            })
            self.model.acknowledge(fid, acknowledged, now: self.now)
        case 85..<92:
            self.clock.advance(by: .seconds(Int64.random(in: 1...40, using: &self.random)))
            // Moving time can make nothing new available (expired deliveries are not handed out).
        case 92..<100:
            _ = try await self.engine.expireDeliveries()
            self.model.expire(now: self.now)
        default:
            return
        }
        try self.compare()
    }

    func slot(_ fid: FID) throws -> UInt32 {
        try self.engine.installation(.fid(fid)).slot
    }

    mutating func send() async throws {
        let collapseKey = Int.random(in: 0..<4, using: &self.random) == 0 ? "k\(Int.random(in: 0..<6, using: &self.random))" : nil
        let ttl: Int64? = [nil, nil, 60, 0].randomElement(using: &self.random)!
        var targets: [FID]
        var target: String
        switch Int.random(in: 0..<3, using: &self.random) {
        case 0:
            let fid = self.fids.randomElement(using: &self.random)!
            targets = [fid]
            target = #""fid":"\#(fid.string)""#
        case 1:
            targets = (0..<Int.random(in: 1...4, using: &self.random)).map { _ in self.fids.randomElement(using: &self.random)! }
            target = #""fids":[\#(targets.map { "\"\($0.string)\"" }.joined(separator: ","))]"#
        default:
            targets = Array(self.subscribers)
            target = #""topic":"t""#
        }
        var android: [String] = []
        var apnsHeaders = [#""apns-priority":"5""#]
        var webHeaders: [String] = []
        if let collapseKey {
            android.append(#""collapse_key":"\#(collapseKey)""#)
            apnsHeaders.append(#""apns-collapse-id":"\#(collapseKey)""#)
            webHeaders.append(#""Topic":"\#(collapseKey)""#)
        }
        if let ttl { android.append(#""ttl":"\#(ttl)s""#) }
        let body = #"{"message":{\#(target),"data":{"k":"v"},"android":{\#(android.joined(separator: ","))},"apns":{"headers":{\#(apnsHeaders.joined(separator: ","))}},"webpush":{"headers":{\#(webHeaders.joined(separator: ","))}}}}"#
        let result = try await self.engine.send(Array(body.utf8))
        self.sequence += 1
        #expect(result.sequence == self.sequence)
        self.model.send(self.sequence, to: targets, collapseKey: collapseKey, ttlSeconds: ttl, now: self.now)
    }

    /// Every installation's pending deliveries, and what each consumer received, agree with the model.
    mutating func compare() throws {
        for fid in self.fids {
            let pending = try self.engine.pendingDeliveries(for: .fid(fid))
            let expected = self.model.installations[fid]!.items.filter { $0.expiry > self.now }
            #expect(pending.map { $0.id.messageSequence & ~DeliveryID.markerBit } == expected.map(\.sequence), "pending of \(fid)")
            #expect(pending.allSatisfy { $0.id.isDeletedMessagesMarker == $0.isDeletedMessagesMarker })
            #expect(pending.map(\.isDeletedMessagesMarker) == expected.map(\.isMarker))
            #expect(pending.map(\.isInFlight) == expected.map(\.isInFlight))
            if let consumer = self.consumers[fid] {
                let received = consumer.poll().map { $0.id.messageSequence & ~DeliveryID.markerBit }
                #expect(received.sorted() == self.model.installations[fid]!.consumer!.received.sorted(), "received by \(fid)")
                self.model.installations[fid]!.consumer!.received = []
            }
        }
    }
}
