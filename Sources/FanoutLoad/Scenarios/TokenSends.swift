/// Where the HTTP front of the fanoutd under load answers.
public struct HTTPFrontTarget: Sendable {
    public var host: String
    public var port: Int
    public var apiKey: String
}

extension LoadSession {
    /// FCM v1 sends to one token each (`message.token`, the typical message), over the binary
    /// protocol and then over the HTTP front, `tokenSends` of each from `concurrency` workers: on
    /// TCP the workers share the backend's connections (pipelining), on HTTP each has its own
    /// keep-alive connection, as an HTTP/1.1 client pool does. Needs the installations registered.
    public func sendToTokens(http: HTTPFrontTarget) async throws {
        guard let backend = self.backend as? FanoutBackend else { throw LoadError("token sends run against fanoutd only") }
        let workload = self.workload
        let count = self.options.tokenSends
        let body: @Sendable (Int) -> [UInt8] = { index in
            Array(LoadWorkload.messageBody(target: #""token":"\#(workload.token(index % workload.installations))""#).utf8)
        }
        await self.phase("send-token tcp", items: "sends") {
            await LoadRunner.closedLoop("send-token tcp", count: count, concurrency: self.options.concurrency, progress: self.progress) { index, worker in
                try await backend.send(body(index), worker: worker)
                return 1
            }
        }
        let clients = try await withThrowingTaskGroup(of: HTTPSendClient.self) { group in
            for _ in 0..<self.options.concurrency {
                group.addTask { try await HTTPSendClient.connect(host: http.host, port: http.port, apiKey: http.apiKey) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        await self.phase("send-token http", items: "sends") {
            let next = Counter()
            let done = Counter()
            return await self.progress.track("send-token http", total: count, done: done) {
                await LoadRunner.inParallel(clients.count) { worker in
                    await LoadRunner.takeTurns(count: count, next: next, done: done) { index in
                        let (status, answer) = try await clients[worker].post("/v1/projects/default/messages:send", body(index))
                        guard status == 200 else { throw LoadError("HTTP \(status): \(String(decoding: answer.prefix(200), as: UTF8.self))") }
                        return 1
                    }
                }
            }
        }
        for client in clients { await client.close() }
    }
}
