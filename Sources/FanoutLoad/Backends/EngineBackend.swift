import FanoutCore

/// An engine embedded in the harness (no network): the same operations on the same data, to
/// measure what replication costs a change (`replication`: an engine on its data directory alone,
/// then a shard owner's engine that also publishes to JetStream).
final class EngineBackend: LoadBackend {
    let system: String
    let engine: Engine
    private let workload: LoadWorkload

    init(system: String, engine: Engine, workload: LoadWorkload) {
        self.system = system
        self.engine = engine
        self.workload = workload
    }

    private func request(_ index: Int) throws -> RegistrationRequest {
        let platform = self.workload.platform(index)
        guard let token = RegistrationToken(self.workload.token(index)), let appID = AppID(LoadWorkload.appID(for: platform)) else {
            throw LoadError("the workload's installation \(index) does not parse")
        }
        return RegistrationRequest(offeredFID: self.workload.fid(index), token: token, platform: platform, appID: appID)
    }

    private func address(_ index: Int, generation: Int = 0) throws -> RegistrationAddress {
        guard let token = RegistrationToken(self.workload.token(index, generation: generation)) else {
            throw LoadError("the workload's token \(index) does not parse")
        }
        return .token(token)
    }

    func register(_ index: Int, worker: Int) async throws {
        try await self.engine.register(self.request(index))
    }

    func registerBatch(_ indices: Range<Int>, worker: Int) async throws -> Int {
        try await self.engine.register(indices.map(self.request)).count { (try? $0.get()) != nil }
    }

    func refreshToken(_ index: Int, generation: Int, worker: Int) async throws {
        guard let token = RegistrationToken(self.workload.token(index, generation: generation)) else { throw LoadError("token \(index) does not parse") }
        try await self.engine.refreshToken(self.address(index, generation: generation - 1), to: token)
    }

    func subscribe(_ members: ArraySlice<Int>, to topic: String, worker: Int) async throws -> Int {
        guard let topic = TopicName(topic) else { throw LoadError("topic \(topic) does not parse") }
        return try await self.engine.subscribe(members.map { try self.address($0) }, to: topic).count { if case .ok = $0 { true } else { false } }
    }

    func sendToTopic(_ topic: String, worker: Int) async throws -> Int {
        Int(try await self.engine.send(Array(LoadWorkload.messageBody(target: #""topic":"\#(topic)""#).utf8)).audience)
    }

    func sendToCondition(_ condition: LoadCondition, worker: Int) async throws -> Int {
        Int(try await self.engine.send(Array(LoadWorkload.messageBody(target: #""condition":"\#(condition.expression)""#).utf8)).audience)
    }

    func ping(worker: Int) async throws {}

    func readInstallation(_ index: Int, worker: Int) async throws {
        _ = try self.engine.installation(self.address(index))
    }

    func close() async {
        try? self.engine.close()
    }
}
