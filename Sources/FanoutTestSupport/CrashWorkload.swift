public import FanoutCore
import Synchronization

/// What the crash test expects of a prefix of the workload: the registry and the mailboxes.
public struct CrashModel {
    public var registry: ReferenceModel
    public var mailboxes = MailboxModel()
    /// Sends so far (each takes the next message sequence number).
    public var sends: UInt64 = 0

    public init(configuration: EngineConfiguration) {
        self.registry = ReferenceModel(configuration: configuration)
    }
}

/// A deterministic stream of engine operations for the crash test: operation `n` depends only on
/// the seed, so a killed child can be resumed from any point and the parent can rebuild the model
/// of any prefix. Every operation is applied both to an engine and to a `CrashModel`.
public struct CrashWorkload {
    public enum Operation: Sendable {
        case register(fid: String, token: String, platform: Platform)
        case subscribe(topic: String, registrations: [String])
        case unsubscribe(topic: String, registrations: [String])
        case refresh(fid: String, token: String)
        case bind(fid: String, user: String, anonymous: Bool)
        case delete(fid: String)
        /// A data message to one installation or to a topic.
        case send(fid: String?, topic: String?, index: Int)
        /// The installation attaches as a consumer, acknowledges everything it is handed, detaches.
        case drain(fid: String)
    }

    public private(set) var operations: [Operation] = []

    /// The first `count` operations of the stream for `seed`.
    public init(seed: UInt64, count: Int) {
        var random = SeededRandomNumberGenerator(seed: seed)
        var fids: [String] = []
        var tokens: [String] = []
        let topics = ["news", "sport", "PUSH_RC", "deals"]
        for index in 0..<count {
            let roll = fids.isEmpty ? 0 : Int.random(in: 0..<100, using: &random)
            switch roll {
            case 0..<30:
                let fid = FID.make(fromRandomBytes: random.bytes(17)).string
                let token = "crash-\(seed)-\(index):APA91b" + String(repeating: "t", count: 100)
                fids.append(fid)
                tokens.append(token)
                self.operations.append(.register(fid: fid, token: token, platform: Platform.allCases.randomElement(using: &random)!))
            case 30..<60:
                let registrations = (0..<Int.random(in: 1...20, using: &random)).map { _ in
                    Bool.random(using: &random) ? fids.randomElement(using: &random)! : tokens.randomElement(using: &random)!
                }
                self.operations.append(.subscribe(topic: topics.randomElement(using: &random)!, registrations: registrations))
            case 60..<70:
                self.operations.append(.unsubscribe(topic: topics.randomElement(using: &random)!, registrations: [fids.randomElement(using: &random)!]))
            case 70..<80:
                let token = "crash-\(seed)-\(index)-r:APA91b" + String(repeating: "r", count: 100)
                tokens.append(token)
                self.operations.append(.refresh(fid: fids.randomElement(using: &random)!, token: token))
            case 80..<86:
                self.operations.append(
                    .bind(fid: fids.randomElement(using: &random)!, user: "user-\(Int.random(in: 0..<5, using: &random))", anonymous: false)
                )
            case 86..<92 where Bool.random(using: &random):
                self.operations.append(.send(fid: nil, topic: topics.randomElement(using: &random)!, index: index))
            case 86..<92:
                self.operations.append(.send(fid: fids.randomElement(using: &random)!, topic: nil, index: index))
            case 92..<96:
                self.operations.append(.drain(fid: fids.randomElement(using: &random)!))
            default:
                self.operations.append(.delete(fid: fids.randomElement(using: &random)!))
            }
        }
    }

    /// Applies operation `operation` to `engine`. Refusals (a deleted FID, a taken token) are part
    /// of the workload: the model refuses the same ones.
    public static func apply(_ operation: Operation, to engine: Engine) async {
        switch operation {
        case .register(let fid, let token, let platform):
            _ = try? await engine.register(
                RegistrationRequest(offeredFID: fid, token: RegistrationToken(token), platform: platform, appID: AppID("1:1:crash:app")!)
            )
        case .subscribe(let topic, let registrations):
            _ = try? await engine.subscribe(registrations.addresses, to: TopicName(topic)!)
        case .unsubscribe(let topic, let registrations):
            _ = try? await engine.unsubscribe(registrations.addresses, from: TopicName(topic)!)
        case .refresh(let fid, let token):
            _ = try? await engine.refreshToken(.fid(FID(fid)!), to: RegistrationToken(token)!)
        case .bind(let fid, let user, let anonymous):
            _ = try? await engine.bindDevice(.fid(FID(fid)!), to: UserID(user)!, anonymous: anonymous)
        case .delete(let fid):
            _ = try? await engine.deleteInstallation(FID(fid)!)
        case .send(let fid, let topic, let index):
            let target = fid.map { #""fid":"\#($0)""# } ?? #""topic":"\#(topic!)""#
            _ = try? await engine.send(Array(#"{"message":{\#(target),"data":{"n":"\#(index)"}}}"#.utf8))
        case .drain(let fid):
            guard let consumer = try? engine.attachConsumer(.installations([.fid(FID(fid)!)]), credit: 1000) else { return }
            _ = try? await consumer.acknowledge(consumer.poll().map(\.id))
            consumer.detach()
        }
    }

    /// Applies operation `operation` to the model, at time `now`.
    public static func apply(_ operation: Operation, to model: inout CrashModel, now: Int64) {
        switch operation {
        case .register(let fid, let token, let platform):
            // Offered FIDs are fresh random ones, so the engine keeps them.
            if case .success = model.registry.expectRegister(offeredFID: fid, token: token, platform: platform, apns: false) {
                model.registry.applyRegister(fid: fid, token: token, platform: platform, now: now)
                model.mailboxes.installations[FID(fid)!] = .init(fid: FID(fid)!, platform: platform)
            }
        case .subscribe(let topic, let registrations):
            _ = model.registry.subscribe(registrations, to: topic)
        case .unsubscribe(let topic, let registrations):
            _ = model.registry.unsubscribe(registrations, from: topic)
        case .refresh(let fid, let token):
            _ = model.registry.refresh(fid, to: token, now: now)
        case .bind(let fid, let user, let anonymous):
            _ = model.registry.bind(fid, to: user, anonymous: anonymous, now: now)
        case .delete(let fid):
            if model.registry.delete(fid) == nil { model.mailboxes.installations[FID(fid)!] = nil }
        case .send(let fid, let topic, _):
            model.sends += 1
            let audience = fid.map { model.registry.devices[$0] == nil ? [] : [$0] } ?? Array(model.registry.subscribers(of: topic!))
            model.mailboxes.send(model.sends, to: audience.map { FID($0)! }, collapseKey: nil, ttlSeconds: nil, now: now)
        case .drain(let fid):
            model.mailboxes.drain(FID(fid)!, now: now)
        }
    }

    /// `model` (after the first `from` operations) advanced to after the first `to`, with the step
    /// clock's times.
    public func advance(_ model: CrashModel, from: Int, to: Int) -> CrashModel {
        var model = model
        for index in from..<to {
            Self.apply(self.operations[index], to: &model, now: StepClock.time(ofStep: index))
        }
        return model
    }

    /// A comparable summary of what the engine holds for the FIDs registered by the first `count`
    /// operations: token, user, topics and pending messages of each live installation.
    public func summary(of engine: Engine, upTo count: Int) -> [String: String] {
        var result: [String: String] = [:]
        for case .register(let fid, _, _) in self.operations.prefix(count) {
            guard let installation = try? engine.installation(.fid(FID(fid)!)) else { continue }
            let topics = (try? engine.topics(of: .fid(installation.fid)))?.map(\.value).sorted() ?? []
            let pending = (try? engine.pendingDeliveries(for: .fid(installation.fid)))?.map { "\($0.id.messageSequence & ~DeliveryID.markerBit)\($0.isDeletedMessagesMarker ? "m" : "")" } ?? []
            result[fid] = "\(installation.token?.value ?? "-") \(installation.user?.value ?? "-") \(topics) \(pending)"
        }
        return result
    }

    /// The same summary of a model.
    public static func summary(of model: CrashModel) -> [String: String] {
        var result: [String: String] = [:]
        for (fid, device) in model.registry.devices {
            let pending = model.mailboxes.installations[FID(fid)!]?.items.map { "\($0.sequence)\($0.isMarker ? "m" : "")" } ?? []
            result[fid] = "\(device.token ?? "-") \(device.user ?? "-") \(device.topics.sorted()) \(pending)"
        }
        return result
    }
}

/// A clock that advances one second per step, so the child and the model agree on every time.
public final class StepClock: WallClock {
    private let step = Mutex(0)

    public init(startingAt step: Int) {
        self.step.withLock { $0 = step }
    }

    public static func time(ofStep step: Int) -> Int64 { 1_767_225_600_000 + Int64(step) * 1000 }

    /// Sets the step the next operation runs at.
    public func set(step: Int) { self.step.withLock { $0 = step } }

    public func now() -> Timestamp { Timestamp(millisecondsSinceEpoch: Self.time(ofStep: self.step.withLock { $0 })) }
}
