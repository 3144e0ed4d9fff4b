import FanoutCore
import FanoutTestSupport
import Foundation
import Testing

/// What each consumer holds, against a model kept from outside the engine. Workers and device
/// consumers attach (a device taking installations another device holds), detach and are granted
/// credit; sends (collapsible, with short TTLs, TTL 0, bursts past the 100-pending rule) fill
/// them; they acknowledge their own, other consumers', unknown, repeated and wrongly marked ids;
/// deliveries expire and installations are deleted while held. After every step:
/// - nothing is handed out twice while held, nor again once acknowledged, and only within the
///   consumer's scope;
/// - no consumer holds more than its credit (a delivery that left its mailbox while held still
///   counts until it is acknowledged, as `docs/wire-protocol.md` says);
/// - what the listing shows in flight is exactly what the consumers hold and is still pending;
/// - nothing waits that a consumer with room could take;
/// - an ACK counts exactly the ids its consumer holds that are still pending.
///
/// The engine iterates hash sets (the consumers due a fill, a device consumer's installations), so
/// each process explores a different order: a failure stops the run at the first step that
/// diverges and reports what diverged with the steps that led to it.
@Suite("What consumers hold, against a model")
struct ConsumerHoldingTests {
    @Test(arguments: [31, 32, 33, 34] as [UInt64])
    func consumersHoldWhatTheModelSays(seed: UInt64) async throws {
        var harness = HoldingHarness(seed: seed)
        for _ in 0..<2500 {
            try await harness.step()
            // The engine's calls here seldom suspend: let the other tests' tasks run.
            await Task.yield()
        }
        for (what, count) in harness.exercised.sorted(by: { $0.key < $1.key }) {
            #expect(count > 0, "\(what) was exercised")
        }
    }
}

struct HoldingHarness {
    struct Attached {
        let consumer: DeliveryConsumer
        /// A worker's platform; `nil` for a device consumer.
        let platform: Platform?
        /// A device consumer's installations, as it holds them now.
        var slots: Set<UInt32>
        var credit: Int
        var held: Set<DeliveryID> = []
    }

    struct Live {
        let fid: FID
        let slot: UInt32
        let platform: Platform
    }

    var random: SeededRandomNumberGenerator
    let clock = ManualClock()
    let engine: Engine
    var installations: [Live] = []
    var attached: [Int: Attached] = [:]
    var nextKey = 0
    var registered = 0
    /// Every id an ACK counted: never handed out again.
    var acknowledged: Set<DeliveryID> = []
    /// TTL-0 deliveries handed out and not yet removed (the listing leaves them out: they expire
    /// the moment they are sent, but stay in the mailbox until acknowledged or swept).
    var nowOrNever: Set<DeliveryID> = []
    var exercised: [String: Int] = [
        "takeSlot": 0, "foreign ACK": 0, "held after its mailbox lost it": 0, "full consumer": 0, "marker": 0, "TTL 0 handed out": 0,
        "redelivered": 0,
    ]
    /// Every id ever handed out, to count redeliveries.
    var everHandedOut: Set<DeliveryID> = []
    /// What the current step found wrong.
    var failures: [String] = []
    /// The last steps, for a failure's report.
    var recent: [String] = []
    var steps = 0

    /// The first step at which the engine and the model disagree.
    struct Divergence: Error, CustomStringConvertible {
        let step: Int
        let failures: [String]
        let recent: [String]

        var description: String {
            "step \(self.step): " + self.failures.joined(separator: "; ") + "\nthe steps before it:\n" + self.recent.joined(separator: "\n")
        }
    }

    mutating func check(_ condition: Bool, _ failure: @autoclosure () -> String) {
        if !condition { self.failures.append(failure()) }
    }

    init(seed: UInt64) {
        self.random = SeededRandomNumberGenerator(seed: seed)
        self.engine = Engine(clock: self.clock)
    }

    var now: Int64 { self.clock.now().millisecondsSinceEpoch }

    mutating func step() async throws {
        self.steps += 1
        let roll = Int.random(in: 0..<100, using: &self.random)
        var done: String
        switch roll {
        case 0..<8 where self.installations.count < 16, 0..<2:
            try await self.register()
            done = "registered slot \(self.installations.last!.slot) (\(self.installations.last!.platform))"
        case 8..<11 where self.installations.count > 6:
            let live = self.installations.remove(at: Int.random(in: 0..<self.installations.count, using: &self.random))
            done = "deleted slot \(live.slot)"
            _ = try await self.engine.deleteInstallation(live.fid)
            for key in self.attached.keys { self.attached[key]!.slots.remove(live.slot) }
            self.nowOrNever = self.nowOrNever.filter { $0.slot != live.slot }
            if self.attached.values.contains(where: { $0.held.contains { $0.slot == live.slot } }) {
                self.exercised["held after its mailbox lost it"]! += 1
            }
        case 11..<50 where !self.installations.isEmpty:
            done = try await self.send()
        case 50..<56 where self.attached.count < 6:
            try self.attachWorker()
            done = "attached worker \(self.nextKey - 1) (\(self.attached[self.nextKey - 1]!.platform!))"
        case 56..<63 where self.attached.count < 6 && !self.installations.isEmpty:
            try self.attachDevice()
            done = "attached device consumer \(self.nextKey - 1) to slots \(self.attached[self.nextKey - 1]!.slots.sorted())"
        case 63..<68 where !self.attached.isEmpty:
            let key = self.attachedKeys.randomElement(using: &self.random)!
            self.attached[key]!.consumer.detach()
            self.attached[key] = nil
            done = "detached \(key)"
        case 68..<72 where !self.attached.isEmpty:
            let key = self.attachedKeys.randomElement(using: &self.random)!
            let credit = Int.random(in: 1...3, using: &self.random)
            try self.attached[key]!.consumer.grant(credit)
            self.attached[key]!.credit += credit
            done = "granted \(key) \(credit)"
        case 72..<94 where !self.attached.isEmpty:
            done = try await self.acknowledge()
        case 94..<100:
            self.clock.advance(by: .seconds(Int64.random(in: 1...8, using: &self.random)))
            _ = try await self.engine.expireDeliveries()
            self.nowOrNever = []
            done = "swept at \(self.now)"
        default:
            return
        }
        try self.settle()
        let holding = self.attachedKeys.map { key in
            let consumer = self.attached[key]!
            return "\(key) \(consumer.platform.map { "\($0)" } ?? "device \(consumer.slots.sorted())") holds \(consumer.held.sorted())/\(consumer.credit)"
        }
        self.recent.append("\(self.steps): \(done); then \(holding.joined(separator: ", "))")
        if self.recent.count > 40 { self.recent.removeFirst() }
        if !self.failures.isEmpty {
            throw Divergence(step: self.steps, failures: self.failures, recent: self.recent)
        }
    }

    var attachedKeys: [Int] { self.attached.keys.sorted() }

    mutating func register() async throws {
        let platform = Platform.allCases.randomElement(using: &self.random)!
        self.registered += 1
        let offered = FID.make(fromRandomBytes: (0..<17).map { _ in UInt8.random(in: 0...255, using: &self.random) })
        let installation = try await self.engine.register(
            RegistrationRequest(offeredFID: offered.string, token: RegistrationToken("holder-\(self.registered)")!, platform: platform, appID: AppID("app")!)
        ).installation
        self.installations.append(Live(fid: installation.fid, slot: installation.slot, platform: platform))
    }

    mutating func attachWorker() throws {
        let platform = Platform.allCases.randomElement(using: &self.random)!
        let credit = Int.random(in: 1...6, using: &self.random)
        let consumer = try self.engine.attachConsumer(.platform(platform), credit: credit)
        self.attached[self.nextKey] = Attached(consumer: consumer, platform: platform, slots: [], credit: credit)
        self.nextKey += 1
    }

    mutating func attachDevice() throws {
        var chosen: [Live] = []
        for _ in 0..<Int.random(in: 1...3, using: &self.random) {
            let live = self.installations.randomElement(using: &self.random)!
            if !chosen.contains(where: { $0.slot == live.slot }) { chosen.append(live) }
        }
        let credit = Int.random(in: 1...6, using: &self.random)
        let consumer = try self.engine.attachConsumer(.installations(chosen.map { .fid($0.fid) }), credit: credit)
        // A device consumer takes its installations from the one that had them, with what that
        // one held of theirs.
        for live in chosen {
            for key in self.attachedKeys where self.attached[key]!.slots.contains(live.slot) {
                self.attached[key]!.slots.remove(live.slot)
                let taken = self.attached[key]!.held.filter { $0.slot == live.slot }
                if !taken.isEmpty { self.exercised["takeSlot"]! += 1 }
                self.attached[key]!.held.subtract(taken)
            }
        }
        self.attached[self.nextKey] = Attached(consumer: consumer, platform: nil, slots: Set(chosen.map(\.slot)), credit: credit)
        self.nextKey += 1
    }

    mutating func send() async throws -> String {
        let collapseKey = Int.random(in: 0..<4, using: &self.random) == 0 ? "k\(Int.random(in: 0..<5, using: &self.random))" : nil
        let ttl = ["", "", "", #","ttl":"3s""#, #","ttl":"0s""#].randomElement(using: &self.random)!
        let collapse = collapseKey.map { #","collapse_key":"\#($0)""# } ?? ""
        // A TTL-0 delivery is handed out only if a consumer has room for it when it is sent (else
        // it is dropped): TTL-0 sends go to installations that have one, when there are any, so
        // that every run hands some out.
        let takeable = self.installations.filter(self.hasConsumerWithRoom)
        let pool = ttl.contains("0s") && !takeable.isEmpty ? takeable : self.installations
        var targets = (0..<Int.random(in: 1...4, using: &self.random)).map { _ in pool.randomElement(using: &self.random)!.fid.string }
        targets = Array(Set(targets)).sorted()
        // Now and then a burst to one installation, past the 100-pending rule (often enough that
        // every run hands out markers).
        let repeats = Int.random(in: 0..<15, using: &self.random) == 0 ? 40 : 1
        var sequences: [UInt64] = []
        for _ in 0..<repeats {
            let target = targets.count == 1 ? #""fid":"\#(targets[0])""# : #""fids":[\#(targets.map { "\"\($0)\"" }.joined(separator: ","))]"#
            let body = #"{"message":{\#(target),"data":{"k":"v"},"android":{"priority":"high"\#(collapse)\#(ttl)}}}"#
            sequences.append(try await self.engine.send(Array(body.utf8)).sequence)
        }
        let slots = targets.compactMap { fid in self.installations.first { $0.fid.string == fid }?.slot }
        return "sent \(sequences.first!)\(repeats > 1 ? "...\(sequences.last!)" : "") to slots \(slots)\(collapse)\(ttl)"
    }

    /// Whether a consumer with room would be handed a delivery to `live` now: its device consumer,
    /// or, when no device consumer has it, a worker of its platform.
    func hasConsumerWithRoom(_ live: Live) -> Bool {
        if let device = self.attached.values.first(where: { $0.slots.contains(live.slot) }) {
            return device.held.count < device.credit
        }
        return self.attached.values.contains { $0.platform == live.platform && $0.held.count < $0.credit }
    }

    mutating func acknowledge() async throws -> String {
        let key = self.attachedKeys.randomElement(using: &self.random)!
        var ids = self.attached[key]!.held.sorted().filter { _ in Int.random(in: 0..<3, using: &self.random) != 0 }
        let others = self.attached.filter { $0.key != key }.values.flatMap(\.held).sorted()
        if let foreign = others.randomElement(using: &self.random), Bool.random(using: &self.random) {
            ids.append(foreign)
            self.exercised["foreign ACK"]! += 1
        }
        if let repeated = ids.first, Bool.random(using: &self.random) { ids.append(repeated) }
        if let some = self.attached[key]!.held.sorted().randomElement(using: &self.random), Bool.random(using: &self.random) {
            // The same delivery named as the other kind (marker for message, or message for marker).
            ids.append(DeliveryID(messageSequence: some.messageSequence ^ DeliveryID.markerBit, slot: some.slot))
        }
        if Int.random(in: 0..<4, using: &self.random) == 0, let live = self.installations.randomElement(using: &self.random) {
            ids.append(DeliveryID(messageSequence: 1_000_000, slot: live.slot))
        }
        ids.shuffle(using: &self.random)
        let stillPending = try self.pendingIDs().union(self.nowOrNever)
        let counted = Set(ids).intersection(self.attached[key]!.held).intersection(stillPending)
        let result = try await self.attached[key]!.consumer.acknowledge(ids)
        self.check(result == counted.count, "ACK of \(ids) counted \(result), the model \(counted.count)")
        self.attached[key]!.held.subtract(ids)
        self.acknowledged.formUnion(counted)
        self.nowOrNever.subtract(counted)
        return "\(key) acknowledged \(ids) (counted \(result))"
    }

    /// Every pending delivery the listing shows (TTL-0 ones aside), with whether it is held.
    func pending() throws -> [(delivery: Delivery, live: Live)] {
        try self.installations.flatMap { live in try self.engine.pendingDeliveries(for: .fid(live.fid)).map { ($0, live) } }
    }

    func pendingIDs() throws -> Set<DeliveryID> {
        Set(try self.pending().map(\.delivery.id))
    }

    /// Takes what each consumer was handed and checks the model's rules.
    mutating func settle() throws {
        var heldByAnyone = Set(self.attached.values.flatMap(\.held))
        for key in self.attachedKeys {
            for delivery in self.attached[key]!.consumer.poll() {
                let id = delivery.id
                self.check(!heldByAnyone.contains(id), "\(id) handed out while held")
                self.check(!self.acknowledged.contains(id), "\(id) handed out after it was acknowledged")
                if let platform = self.attached[key]!.platform {
                    self.check(delivery.platform == platform, "a worker of \(platform) was handed \(id) of \(delivery.platform)")
                } else {
                    self.check(self.attached[key]!.slots.contains(id.slot), "a device consumer was handed \(id), not its own")
                }
                heldByAnyone.insert(id)
                self.attached[key]!.held.insert(id)
                if id.isDeletedMessagesMarker { self.exercised["marker"]! += 1 }
                if delivery.expiry.millisecondsSinceEpoch <= self.now {
                    self.nowOrNever.insert(id)
                    self.exercised["TTL 0 handed out"]! += 1
                }
                if !self.everHandedOut.insert(id).inserted { self.exercised["redelivered"]! += 1 }
            }
            let consumer = self.attached[key]!
            self.check(consumer.held.count <= consumer.credit, "a consumer holds \(consumer.held.count) with credit \(consumer.credit)")
            if consumer.held.count == consumer.credit { self.exercised["full consumer"]! += 1 }
        }
        let pending = try self.pending()
        let pendingIDs = Set(pending.map(\.delivery.id))
        self.check(Set(pending.filter(\.delivery.isInFlight).map(\.delivery.id)) == heldByAnyone.intersection(pendingIDs), "in flight: what is held")
        for (delivery, live) in pending where !delivery.isInFlight {
            if let device = self.attached.values.first(where: { $0.slots.contains(live.slot) }) {
                self.check(device.held.count >= device.credit, "\(delivery.id) waits while its device consumer has room")
            } else {
                for worker in self.attached.values where worker.platform == live.platform {
                    self.check(worker.held.count >= worker.credit, "\(delivery.id) waits while a worker has room")
                }
            }
        }
    }
}
