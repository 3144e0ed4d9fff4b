import FanoutCore
import FanoutHTTP
import FanoutKeys
import Foundation
import FanoutServer
import FanoutWire

/// The HTTP front's calls on a cluster node (docs/scale-out.md, "The HTTP front"): each is the
/// request a TCP client would send, routed to the shards' owners as that client's is
/// (`ClusterService.perform`), its reply turned back into the front's types.
struct ClusterHTTPBackend: HTTPFrontBackend, InstallationCredentialsBackend {
    let cluster: ClusterService

    func sendMessage(_ body: [UInt8], in project: ProjectID) async throws(FanoutError) -> (messageID: String, recipients: [RecipientResult]) {
        let receipt = try await self.reply(to: .send(project: project.value, body: body)) { if case .sent(let receipt) = $0 { receipt } else { nil } }
        return (receipt.messageID, receipt.recipients)
    }

    func subscribe(_ registrations: [RegistrationAddress], to topic: TopicName, in project: ProjectID) async throws(FanoutError) -> [BatchItemResult] {
        try await self.reply(to: .subscribe(project: project.value, topic: topic.value, registrations: RegistrationList(registrations.map(Self.text)))) { Self.itemResults($0) }
    }

    func unsubscribe(_ registrations: [RegistrationAddress], from topic: TopicName, in project: ProjectID) async throws(FanoutError) -> [BatchItemResult] {
        try await self.reply(to: .unsubscribe(project: project.value, topic: topic.value, registrations: RegistrationList(registrations.map(Self.text)))) { Self.itemResults($0) }
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

    // MARK: - Installation credentials (issued by the owner of the installation's shard)

    /// Issued by the owner of the installation's shard, by its clock (`now` is this node's).
    func createInstallation(_ request: RegistrationRequest, in project: ProjectID, creatingOnly: Bool, now: Int64) async throws(FanoutError) -> (result: RegistrationResult, credentials: InstallationCredentials) {
        let fields = RegistrationFields(offeredFID: request.offeredFID, platform: request.platform, appID: request.appID.value)
        let registering = ClientRequest.register(project: project.value, fields, issuingCredentials: true)
        let reply = await self.cluster.perform(registering, asApp: creatingOnly)
        if case .registeredWithCredentials(let result, let credentials) = reply { return (result, credentials) }
        throw Self.failure(reply, to: registering)
    }

    func generateAuthToken(for fid: FID, in project: ProjectID, presented: RefreshToken, now: Int64) async throws(FanoutError) -> AuthToken {
        let generating = ClientRequest.generateAuthToken(project: project.value, fid: fid.description)
        let reply = await self.cluster.perform(generating, presented: presented)
        if case .authToken(let token) = reply { return token }
        throw Self.failure(reply, to: generating)
    }

    /// Deleted once the owner has shown `presented` is the installation's refresh token (by
    /// issuing an auth token under it): this node's copy of the shard may be a moment behind.
    func deleteInstallation(_ fid: FID, in project: ProjectID, presented: RefreshToken) async throws(FanoutError) {
        _ = try await self.generateAuthToken(for: fid, in: project, presented: presented, now: self.now())
        _ = try await self.reply(to: .deleteInstallation(project: project.value, fid: fid.description)) { if case .installation = $0 { () } else { nil } }
    }

    func jwks() async throws(FanoutError) -> String {
        try await self.reply(to: .jwks) { if case .names(_, let names) = $0 { names.first } else { nil } }
    }

    func now() -> Int64 { Int64(Date().timeIntervalSince1970) }

    /// What `expected` finds in the reply to `request`; the reply's error is thrown.
    private func reply<Value>(to request: ClientRequest, _ expected: (ServerMessage) -> Value?) async throws(FanoutError) -> Value {
        let reply = await self.cluster.perform(request)
        if let value = expected(reply) { return value }
        throw Self.failure(reply, to: request)
    }

    /// The error a reply that is not the one expected stands for.
    private static func failure(_ reply: ServerMessage, to request: ClientRequest) -> FanoutError {
        if case .error(let error) = reply { return error }
        return FanoutError(.internal, "an unexpected reply to \(request.opcode): \(reply.opcode)")
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
