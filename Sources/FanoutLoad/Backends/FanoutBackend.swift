public import FanoutClient
import FanoutCore
import FanoutWire

/// fanoutd through FanoutClient: registrations with FID and token, batch subscriptions by token,
/// sends of a typical message (the server validates it, resolves the audience and puts one
/// delivery per recipient in a mailbox, durably).
public final class FanoutBackend: LoadBackend {
    /// How reports name it: `fanout`, or `fanout cluster` through a cluster node.
    public let system: String
    private let workload: LoadWorkload
    private let clients: [FanoutClient]
    private let batchReplies: BatchReplies

    public init(workload: LoadWorkload, clients: [FanoutClient], system: String = "fanout", batchReplies: BatchReplies = .fids) {
        self.workload = workload
        self.clients = clients
        self.system = system
        self.batchReplies = batchReplies
    }

    public static func connect(
        workload: LoadWorkload, host: String, port: Int, apiKey: String, connections: Int, tls: FanoutClient.TLS? = nil, system: String = "fanout",
        batchReplies: BatchReplies = .fids
    ) async throws -> FanoutBackend {
        var clients: [FanoutClient] = []
        for _ in 0..<max(1, connections) {
            clients.append(try await FanoutClient.connect(host: host, port: port, apiKey: apiKey, tls: tls, clientName: "fanout-load"))
        }
        return FanoutBackend(workload: workload, clients: clients, system: system, batchReplies: batchReplies)
    }

    private func client(_ worker: Int) -> FanoutClient {
        self.clients[worker % self.clients.count]
    }

    private func fields(_ index: Int) -> RegistrationFields {
        let platform = self.workload.platform(index)
        return RegistrationFields(
            offeredFID: self.workload.fid(index),
            token: self.workload.token(index),
            platform: platform,
            appID: LoadWorkload.appID(for: platform)
        )
    }

    public func register(_ index: Int, worker: Int) async throws {
        _ = try await self.client(worker).register(self.fields(index))
    }

    public func registerBatch(_ indices: Range<Int>, worker: Int) async throws -> Int {
        try Self.registered(try await self.client(worker).request(self.batchRequest(indices)))
    }

    /// Each batch's request encoded once (`EncodedRequest`), sent as it is.
    public func registrationBatchCalls(_ batches: [Range<Int>]) -> [PreparedCall] {
        batches.map { indices in
            let encoded = Result { () throws(ProtocolError) in try EncodedRequest(self.batchRequest(indices)) }
            return { worker in try Self.registered(try await self.client(worker).request(encoded.get())) }
        }
    }

    /// REGISTER_BATCH_FIDS (or REGISTER_BATCH, as `batchReplies` says) of installations `indices`.
    private func batchRequest(_ indices: Range<Int>) -> ClientRequest {
        let items = indices.map(self.fields)
        return self.batchReplies == .fids ? .registerBatchFIDs(project: "default", items) : .registerBatch(project: "default", items)
    }

    /// How many items a register batch's reply registered.
    private static func registered(_ reply: ServerMessage) throws -> Int {
        switch reply {
        case .registeredFIDs(let receipts): receipts.count { if case .registered = $0 { true } else { false } }
        case .registeredBatch(let outcomes): outcomes.count { if case .registered = $0 { true } else { false } }
        default: throw LoadError("the server answered a register batch with \(reply.opcode)")
        }
    }

    public func ping(worker: Int) async throws {
        try await self.client(worker).ping()
    }

    public func readInstallation(_ index: Int, worker: Int) async throws {
        _ = try await self.client(worker).installation(self.workload.token(index))
    }

    public func refreshToken(_ index: Int, generation: Int, worker: Int) async throws {
        _ = try await self.client(worker).refreshToken(self.workload.fid(index), to: self.workload.token(index, generation: generation))
    }

    public func subscribe(_ members: ArraySlice<Int>, to topic: String, worker: Int) async throws -> Int {
        try await self.subscribe(self.tokens(of: members), to: topic, worker: worker)
    }

    /// Each batch's tokens packed into the list SUBSCRIBE's frame is written from.
    public func subscriptionCalls(_ batches: [(topic: String, members: ArraySlice<Int>)]) -> [PreparedCall] {
        batches.map { topic, members in
            let tokens = self.tokens(of: members)
            return { worker in try await self.subscribe(tokens, to: topic, worker: worker) }
        }
    }

    private func tokens(of members: ArraySlice<Int>) -> RegistrationList {
        RegistrationList(members.map { self.workload.token($0) })
    }

    private func subscribe(_ tokens: RegistrationList, to topic: String, worker: Int) async throws -> Int {
        try await self.client(worker).subscribe(tokens, to: topic).count { $0 == .ok }
    }

    public func sendToTopic(_ topic: String, worker: Int) async throws -> Int {
        Int(try await self.client(worker).send(LoadWorkload.messageBody(target: #""topic":"\#(topic)""#)).audience)
    }

    /// Sends `body` (FCM v1 JSON) and answers once it is durable.
    func send(_ body: [UInt8], worker: Int) async throws {
        _ = try await self.client(worker).send(body)
    }

    public func sendToCondition(_ condition: LoadCondition, worker: Int) async throws -> Int {
        Int(try await self.client(worker).send(LoadWorkload.messageBody(target: #""condition":"\#(condition.expression)""#)).audience)
    }

    public func close() async {
        for client in self.clients {
            try? await client.close()
        }
    }
}
