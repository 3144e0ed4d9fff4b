public import FanoutCore
import Synchronization

/// A deterministic stream of engine operations for the crash test: operation `n` depends only on
/// the seed, so a killed child can be resumed from any point and the parent can rebuild the model
/// of any prefix. Every operation is applied both to an engine and to a `ReferenceModel`.
public struct CrashWorkload {
    public enum Operation: Sendable {
        case register(fid: String, token: String, platform: Platform)
        case subscribe(topic: String, registrations: [String])
        case unsubscribe(topic: String, registrations: [String])
        case refresh(fid: String, token: String)
        case bind(fid: String, user: String, anonymous: Bool)
        case delete(fid: String)
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
            case 80..<92:
                self.operations.append(
                    .bind(fid: fids.randomElement(using: &random)!, user: "user-\(Int.random(in: 0..<5, using: &random))", anonymous: false)
                )
            default:
                self.operations.append(.delete(fid: fids.randomElement(using: &random)!))
            }
        }
    }

    /// Applies operation `operation` to `engine`. Refusals (a deleted FID, a taken token) are part
    /// of the workload: the model refuses the same ones.
    public static func apply(_ operation: Operation, to engine: Engine) {
        switch operation {
        case .register(let fid, let token, let platform):
            _ = try? engine.register(
                RegistrationRequest(offeredFID: fid, token: RegistrationToken(token), platform: platform, appID: AppID("1:1:crash:app")!)
            )
        case .subscribe(let topic, let registrations):
            _ = try? engine.subscribe(registrations, to: TopicName(topic)!)
        case .unsubscribe(let topic, let registrations):
            _ = try? engine.unsubscribe(registrations, from: TopicName(topic)!)
        case .refresh(let fid, let token):
            _ = try? engine.refreshToken(.fid(FID(fid)!), to: RegistrationToken(token)!)
        case .bind(let fid, let user, let anonymous):
            _ = try? engine.bindDevice(.fid(FID(fid)!), to: UserID(user)!, anonymous: anonymous)
        case .delete(let fid):
            _ = try? engine.deleteInstallation(FID(fid)!)
        }
    }

    /// Applies operation `operation` to the model, at time `now`.
    public static func apply(_ operation: Operation, to model: inout ReferenceModel, now: Int64) {
        switch operation {
        case .register(let fid, let token, let platform):
            // Offered FIDs are fresh random ones, so the engine keeps them.
            if case .success = model.expectRegister(offeredFID: fid, token: token, platform: platform, apns: false) {
                model.applyRegister(fid: fid, token: token, platform: platform, now: now)
            }
        case .subscribe(let topic, let registrations):
            _ = model.subscribe(registrations, to: topic)
        case .unsubscribe(let topic, let registrations):
            _ = model.unsubscribe(registrations, from: topic)
        case .refresh(let fid, let token):
            _ = model.refresh(fid, to: token, now: now)
        case .bind(let fid, let user, let anonymous):
            _ = model.bind(fid, to: user, anonymous: anonymous, now: now)
        case .delete(let fid):
            _ = model.delete(fid)
        }
    }

    /// `model` (after the first `from` operations) advanced to after the first `to`, with the step
    /// clock's times.
    public func advance(_ model: ReferenceModel, from: Int, to: Int) -> ReferenceModel {
        var model = model
        for index in from..<to {
            Self.apply(self.operations[index], to: &model, now: StepClock.time(ofStep: index))
        }
        return model
    }

    /// A comparable summary of what the engine holds for the FIDs registered by the first `count`
    /// operations: token, user and topics of each live installation.
    public func summary(of engine: Engine, upTo count: Int) -> [String: String] {
        var result: [String: String] = [:]
        for case .register(let fid, _, _) in self.operations.prefix(count) {
            guard let installation = try? engine.installation(.fid(FID(fid)!)) else { continue }
            let topics = (try? engine.topics(of: .fid(installation.fid)))?.map(\.value).sorted() ?? []
            result[fid] = "\(installation.token?.value ?? "-") \(installation.user?.value ?? "-") \(topics)"
        }
        return result
    }

    /// The same summary of a model.
    public static func summary(of model: ReferenceModel) -> [String: String] {
        model.devices.mapValues { device in "\(device.token ?? "-") \(device.user ?? "-") \(device.topics.sorted())" }
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
