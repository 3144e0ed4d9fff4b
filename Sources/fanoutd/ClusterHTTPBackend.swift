import FanoutCore
import FanoutHTTP
import FanoutServer
import FanoutWire

/// The HTTP front's calls on a cluster node (docs/scale-out.md, "The HTTP front"): each is the
/// request a TCP client would send, routed to the shards' owners as that client's is
/// (`ClusterService.perform`), its reply turned back into the front's types.
struct ClusterHTTPBackend: HTTPFrontBackend {
    let cluster: ClusterService

    func sendMessage(_ body: [UInt8], in project: ProjectID) async throws(FanoutError) -> (messageID: String, recipients: [RecipientResult]) {
        let receipt = try await self.reply(to: .send(project: project.value, body: body)) { if case .sent(let receipt) = $0 { receipt } else { nil } }
        return (receipt.messageID, receipt.recipients)
    }

    func subscribe(_ registrations: [RegistrationAddress], to topic: TopicName, in project: ProjectID) async throws(FanoutError) -> [BatchItemResult] {
        try await self.reply(to: .subscribe(project: project.value, topic: topic.value, registrations: registrations.map(Self.text))) { Self.itemResults($0) }
    }

    func unsubscribe(_ registrations: [RegistrationAddress], from topic: TopicName, in project: ProjectID) async throws(FanoutError) -> [BatchItemResult] {
        try await self.reply(to: .unsubscribe(project: project.value, topic: topic.value, registrations: registrations.map(Self.text))) { Self.itemResults($0) }
    }

    func installation(_ address: RegistrationAddress, in project: ProjectID) async throws(FanoutError) -> Installation {
        try await self.reply(to: .getInstallation(project: project.value, registration: Self.text(address))) {
            if case .installation(_, let installation) = $0 { installation } else { nil }
        }
    }

    func topics(of address: RegistrationAddress, in project: ProjectID) async throws(FanoutError) -> [TopicName] {
        try await self.reply(to: .topicsOf(project: project.value, registration: Self.text(address))) {
            if case .names(_, let names) = $0 { names.compactMap(TopicName.init) } else { nil }
        }
    }

    var isReady: Bool { self.cluster.acceptsChanges }

    /// What `expected` finds in the reply to `request`; the reply's error is thrown.
    private func reply<Value>(to request: ClientRequest, _ expected: (ServerMessage) -> Value?) async throws(FanoutError) -> Value {
        let reply = await self.cluster.perform(request)
        if let value = expected(reply) { return value }
        if case .error(let error) = reply { throw error }
        throw FanoutError(.internal, "an unexpected reply to \(request.opcode): \(reply.opcode)")
    }

    private static func itemResults(_ reply: ServerMessage) -> [BatchItemResult]? {
        if case .itemResults(_, let results) = reply { results } else { nil }
    }

    /// The registration as the wire carries it: a FID's string, or the token.
    private static func text(_ address: RegistrationAddress) -> String {
        switch address {
        case .fid(let fid): fid.string
        case .token(let token): token.value
        }
    }
}
