import NIOCore

/// Redis as a push backend without fanout keeps it, with RESP over pipelined connections:
/// `HSET tokens TOKEN FID` per registration (a refresh is `HDEL` of the old token and `HSET` of the
/// new one), a set of tokens per topic filled with `SADD` (up to 1000 members per call), and a
/// send's audience read with `SMEMBERS` (topic) or `SUNIONSTORE` + `SINTER` (condition).
public final class RedisBackend: LoadBackend {
    public let system = "redis"
    private let workload: LoadWorkload
    private let connections: [RedisConnection]

    public init(workload: LoadWorkload, connections: [RedisConnection]) {
        self.workload = workload
        self.connections = connections
    }

    public static func connect(workload: LoadWorkload, host: String, port: Int, connections: Int) async throws -> RedisBackend {
        var opened: [RedisConnection] = []
        for _ in 0..<max(1, connections) {
            opened.append(try await RedisConnection.connect(host: host, port: port))
        }
        return RedisBackend(workload: workload, connections: opened)
    }

    private func connection(_ worker: Int) -> RedisConnection {
        self.connections[worker % self.connections.count]
    }

    /// The replies, or the first error reply thrown.
    @discardableResult
    private func run(_ commands: [[String]], worker: Int) async throws -> [RESPValue] {
        try await self.run(encoded: RESPValue.encodedCommands(commands), count: commands.count, worker: worker)
    }

    /// The replies to `count` commands already in RESP, or the first error reply thrown.
    private func run(encoded commands: ByteBuffer, count: Int, worker: Int) async throws -> [RESPValue] {
        let replies = try await self.connection(worker).pipeline(encoded: commands, count: count)
        for reply in replies {
            if case .error(let message) = reply { throw RedisReplyError(message: message) }
        }
        return replies
    }

    public func register(_ index: Int, worker: Int) async throws {
        try await self.run([self.hset(index)], worker: worker)
    }

    public func registerBatch(_ indices: Range<Int>, worker: Int) async throws -> Int {
        try await self.run(indices.map(self.hset), worker: worker).count
    }

    /// The HSET that registers installation `index`: its token's field in `tokens`, its FID the value.
    private func hset(_ index: Int) -> [String] {
        ["HSET", "tokens", self.workload.token(index), self.workload.fid(index)]
    }

    /// Each batch's pipeline of HSETs written in RESP ahead, sent as it is.
    public func registrationBatchCalls(_ batches: [Range<Int>]) -> [PreparedCall] {
        batches.map { indices in
            let commands = RESPValue.encodedCommands(indices.map(self.hset))
            return { worker in try await self.run(encoded: commands, count: indices.count, worker: worker).count }
        }
    }

    public func ping(worker: Int) async throws {
        try await self.run([["PING"]], worker: worker)
    }

    public func readInstallation(_ index: Int, worker: Int) async throws {
        let replies = try await self.run([["HGET", "tokens", self.workload.token(index)]], worker: worker)
        guard case .bulkString(_?) = replies[0] else { throw LoadError("installation \(index) is not in Redis") }
    }

    public func refreshToken(_ index: Int, generation: Int, worker: Int) async throws {
        try await self.run(
            [
                ["HDEL", "tokens", self.workload.token(index, generation: generation - 1)],
                ["HSET", "tokens", self.workload.token(index, generation: generation), self.workload.fid(index)],
            ],
            worker: worker
        )
    }

    public func subscribe(_ members: ArraySlice<Int>, to topic: String, worker: Int) async throws -> Int {
        let replies = try await self.run([Self.sadd(members, to: topic, of: self.workload)], worker: worker)
        return replies[0].count ?? 0
    }

    /// Each batch's SADD written in RESP ahead, sent as it is.
    public func subscriptionCalls(_ batches: [(topic: String, members: ArraySlice<Int>)]) -> [PreparedCall] {
        batches.map { topic, members in
            let command = RESPValue.encodedCommands([Self.sadd(members, to: topic, of: self.workload)])
            return { worker in try await self.run(encoded: command, count: 1, worker: worker)[0].count ?? 0 }
        }
    }

    private static func sadd(_ members: ArraySlice<Int>, to topic: String, of workload: LoadWorkload) -> [String] {
        ["SADD", "topic:\(topic)"] + members.map { workload.token($0) }
    }

    public func sendToTopic(_ topic: String, worker: Int) async throws -> Int {
        let replies = try await self.run([["SMEMBERS", "topic:\(topic)"]], worker: worker)
        return replies[0].count ?? 0
    }

    public func sendToCondition(_ condition: LoadCondition, worker: Int) async throws -> Int {
        let scratch = "audience:\(worker):\(condition.all)"
        let replies = try await self.run(
            [
                ["SUNIONSTORE", scratch] + condition.anyOf.map { "topic:\($0)" },
                ["SINTER", "topic:\(condition.all)", scratch],
                ["DEL", scratch],
            ],
            worker: worker
        )
        return replies[1].count ?? 0
    }

    public func close() async {
        for connection in self.connections {
            try? await connection.close()
        }
    }
}
