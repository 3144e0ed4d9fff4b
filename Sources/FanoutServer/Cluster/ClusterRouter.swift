internal import FanoutCluster
internal import FanoutCore
internal import FanoutKeys
internal import FanoutModel
internal import FanoutWire

/// How a cluster node answers its clients' requests (docs/scale-out.md, "Routing"): any node
/// answers any request. A request about one installation goes to the owner of the installation's
/// shard; a request about a project's settings goes to every shard; a count, a listing or a send
/// to a topic, a condition, a user or several recipients goes to every shard, and the replies are
/// summed or merged; a consumer receives its deliveries from every shard (`ClusterConsumer`).
/// Installation credentials are issued by the owner of the installation's shard, with its node's
/// signing key; every node accepts every node's tokens (`ClusterSigningKeys`).
final class ClusterRouter: Sendable {
    let shards: ShardRequests
    /// The cluster's installation-token keys; nil: this node issues no credentials.
    let signingKeys: ClusterSigningKeys?
    var node: ClusterNode { self.shards.node }
    var map: ShardMap { self.shards.node.map }

    /// The consumers attached through this node, to follow its ownership.
    private let consumers = Locked<[ObjectIdentifier: WeakConsumer]>([:])

    private struct WeakConsumer {
        weak var consumer: ClusterConsumer?
    }

    /// The consumers other nodes attached to the shards this node owns.
    let shardConsumers: ShardConsumers

    init(_ shards: ShardRequests, signingKeys: ClusterSigningKeys? = nil) {
        self.shards = shards
        self.signingKeys = signingKeys
        self.shardConsumers = ShardConsumers(node: shards.node, maximumPayloadSize: shards.maximumPayloadSize)
    }

    /// A consumer of `scope`'s deliveries from every shard that holds any (`ClusterConsumer`): a
    /// platform's, from every shard; named installations', from their shards (a token's, as this
    /// node's copies of the shards place it: one registered a moment ago elsewhere may not be
    /// found yet).
    func attach(_ scope: AttachScope, credit: Int, in project: String) throws(FanoutError) -> ClusterConsumer {
        // Checked here, on this node's copy: a part on another node's shard is attached later.
        let id = try RequestExecutor.project(project)
        guard self.node.served(0).engine.projectIDs().contains(id) else { throw .notFound("no project \(id)", field: "project") }
        var scopes: [Int: AttachScope] = [:]
        switch scope {
        case .platform:
            for shard in 0..<self.map.count { scopes[shard] = scope }
        case .installations(let registrations):
            guard case .installations(let addresses) = try RequestExecutor.scope(scope) else { break }
            guard (1...EngineConfiguration().maximumBatchSize).contains(addresses.count) else {
                throw FanoutError(.invalidArgument, "a consumer attaches to 1...\(EngineConfiguration().maximumBatchSize) installations, got \(addresses.count)", field: "installations")
            }
            let tokens = addresses.compactMap { if case .token(let token) = $0 { token } else { nil } }
            var tokenShards = self.localShards(of: tokens, in: project).makeIterator()
            var names: [Int: [String]] = [:]
            for (index, (address, registration)) in zip(addresses, registrations).enumerated() {
                let shard: Int
                switch address {
                case .fid(let fid): shard = self.map.shard(of: fid)
                case .token:
                    guard let found = tokenShards.next() ?? nil else {
                        throw FanoutError(.notFound, "no installation has this registration", field: "installations[\(index)]")
                    }
                    shard = found
                }
                names[shard, default: []].append(registration)
            }
            scopes = names.mapValues { .installations($0) }
        }
        let consumer = try ClusterConsumer(requests: self.shards, scopes: scopes, credit: credit, in: project)
        self.consumers.withLock { consumers in
            consumers = consumers.filter { $0.value.consumer != nil }
            consumers[ObjectIdentifier(consumer)] = WeakConsumer(consumer: consumer)
        }
        return consumer
    }

    /// This node's copy of the shard of the installation `fid` (its owner's engine, or a follower's
    /// a moment behind); nil when `fid` is not one.
    func localEngine(of fid: String) -> Engine? {
        FID(fid, allowingLegacy: true).map { self.node.served(self.map.shard(of: $0)).engine }
    }

    /// After the node's turn: every consumer attached here follows the node's ownership.
    func refreshConsumers() {
        for entry in self.consumers.withLock({ Array($0.values) }) { entry.consumer?.refresh() }
    }

    /// The reply to `request` from a client that `principal` speaks for (its permissions checked).
    func perform(_ request: ClientRequest, principal: Principal) async -> ServerMessage {
        let opcode = request.opcode
        switch request {
        case .createProject, .deleteProject, .setLegacyInstanceIDs, .setAnonymousCleanUp:
            return Self.settingOnEveryShard(await self.shards.performOnEveryShard(request), request: request)
        case .listProjects:
            let reply = await self.shards.perform(request, onShard: 0)
            guard case .names(let opcode, let names) = reply else { return reply }
            return .names(opcode, names.filter { principal.projects.contains($0) })
        case .register(let project, let fields, _):
            return await self.shards.perform(request, onShard: self.shard(registering: fields, in: project), asApp: principal.kind == .app)
        case .issueCredentials(let project, let registration):
            return await self.performOnShard(of: registration, request, in: project)
        case .generateAuthToken(_, let fid):
            return await self.generateAuthToken(request, fid: fid, principal: principal)
        case .jwks:
            return self.jwks()
        case .rotateSigningKey:
            return await self.rotateSigningKey()
        case .registerBatch(let project, let items):
            let shards = items.map { self.shard(registering: $0, in: project) }
            return await self.split(items, by: shards, into: { .registerBatch(project: project, $0) }) { (reply: ServerMessage) -> [RegistrationOutcome]? in
                if case .registeredBatch(let outcomes) = reply { return outcomes }
                return nil
            }.map(ServerMessage.registeredBatch).reply
        case .registerBatchFIDs(let project, let items):
            let shards = items.map { self.shard(registering: $0, in: project) }
            return await self.split(items, by: shards, into: { .registerBatchFIDs(project: project, $0) }) { (reply: ServerMessage) -> [RegistrationReceipt]? in
                if case .registeredFIDs(let receipts) = reply { return receipts }
                return nil
            }.map(ServerMessage.registeredFIDs).reply
        case .refreshToken(let project, let registration, _), .touch(let project, let registration), .setAPNsToken(let project, let registration, _),
            .getInstallation(let project, let registration), .topicsOf(let project, let registration), .pending(let project, let registration),
            .signOut(let project, _, let registration):
            return await self.performOnShard(of: registration, request, in: project)
        case .deleteInstallation(_, let fid):
            return await self.shards.perform(request, onShard: FID(fid).map(self.map.shard(of:)) ?? 0)
        case .installationByAPNsToken:
            return Self.first(await self.shards.performOnEveryShard(request), notFound: .notFound)
        case .subscribe(let project, let topic, let registrations), .unsubscribe(let project, let topic, let registrations):
            guard registrations.count <= EngineConfiguration().maximumBatchSize else {
                return .error(.invalidArgument("at most \(EngineConfiguration().maximumBatchSize) registrations per request, got \(registrations.count)", field: "registrations"))
            }
            let isSubscribe = opcode == .subscribe
            return await self.performItems(Array(registrations), in: project) {
                let items = RegistrationList($0)
                return isSubscribe ? .subscribe(project: project, topic: topic, registrations: items) : .unsubscribe(project: project, topic: topic, registrations: items)
            }.map { .itemResults(opcode, $0) }.reply
        case .installationCount, .subscriberCount, .audience, .pruneExpired, .expireDeliveries:
            return Self.sum(await self.shards.performOnEveryShard(request), opcode: opcode)
        case .listTopics(_, _, let limit):
            return Self.mergeTopics(await self.shards.performOnEveryShard(request), limit: Int(limit))
        case .staleInstallations(_, let limit):
            return Self.mergeStale(await self.shards.performOnEveryShard(request), limit: Int(limit))
        case .stats:
            return Self.sumStatistics(await self.shards.performOnEveryShard(request))
        case .send(let project, let body, _):
            return await self.send(request, body: body, in: project)
        case .bindDevice(let project, let registration, let user, let anonymous):
            return await self.bind(request, registration: registration, user: user, anonymous: anonymous, in: project)
        case .linkUser(let project, let anonymous, let permanent):
            return await self.link(request, anonymous: anonymous, permanent: permanent, in: project)
        case .getUser:
            return Self.mergeUsers(await self.shards.performOnEveryShard(request), opcode: opcode)
        case .listUsers(_, _, let limit):
            return Self.mergeUserPages(await self.shards.performOnEveryShard(request), limit: Int(limit))
        case .cleanUpAnonymousUsers:
            return Self.mergeNames(await self.shards.performOnEveryShard(request), opcode: opcode)
        case .hello, .ping, .snapshot, .attach, .grant, .acknowledge, .detach:
            return .error(FanoutError(.internal, "\(opcode) is handled by the connection"))
        }
    }

    /// SNAPSHOT on a cluster node: a snapshot of each of its shards (`ClusterNode.snapshotNow()`);
    /// blocks on files and NATS.
    func snapshot() throws(FanoutError) -> [String] {
        try self.node.snapshotNow()
    }


    // MARK: - Where an installation lives

    /// `request`, about the installation `registration` names, performed by its shard.
    func performOnShard(of registration: String, _ request: ClientRequest, in project: String) async -> ServerMessage {
        switch await self.shard(of: registration, in: project) {
        case .success(let shard): return await self.shards.perform(request, onShard: shard)
        case .failure(let error): return .error(error)
        }
    }

    /// The shard of the installation `registration` names: a FID's own; a token's, where the
    /// token is registered (or was, and was retired); a token no shard knows, the shard new
    /// registrations of it go to. A string that is neither goes to shard 0, whose owner answers
    /// what is wrong with it. `UNAVAILABLE` when a shard that may hold the token did not answer.
    private func shard(of registration: String, in project: String) async -> Result<Int, FanoutError> {
        switch RegistrationAddress(parsing: registration) {
        case .fid(let fid): return .success(self.map.shard(of: fid))
        case .token(let token): return await self.shard(of: token, in: project).map { $0 ?? self.map.shard(of: token) }
        case nil: return .success(0)
        }
    }

    /// A batch of items, each about one installation, each performed by its installation's shard,
    /// the answers in input order. An item goes where this node's copies of the shards place it (a
    /// FID's shard, or the shard a copy knows the token on), or else, asking no other node first,
    /// to its token's own shard, where a new token registers; an item that shard answers
    /// `NOT_FOUND` is looked up on every shard (`shard(of:)`) and sent again where it is, or
    /// answered `UNAVAILABLE` when a shard that may know it did not answer. (Looking every token
    /// up first cost a request per token: docs/performance.md.)
    private func performItems(
        _ registrations: [String],
        in project: String,
        as request: ([String]) -> ClientRequest
    ) async -> Result<[BatchItemResult], Refusal> {
        func answers(_ reply: ServerMessage) -> [BatchItemResult]? {
            if case .itemResults(_, let results) = reply { return results }
            return nil
        }
        let addresses = registrations.map(RegistrationAddress.init(parsing:))
        let tokens = addresses.enumerated().compactMap { index, address in
            if case .token(let token) = address { (index, token) } else { nil }
        }
        var shards = addresses.map { address in
            if case .fid(let fid) = address { self.map.shard(of: fid) } else { 0 }
        }
        var guessed: [Int] = []
        for ((index, token), shard) in zip(tokens, self.localShards(of: tokens.map(\.1), in: project)) {
            if shard == nil { guessed.append(index) }
            shards[index] = shard ?? self.map.shard(of: token)
        }
        var results: [BatchItemResult]
        switch await self.split(registrations, by: shards, into: request, answers: answers) {
        case .success(let answered): results = answered
        case .failure(let refusal): return .failure(refusal)
        }
        // A guess that missed: a token registered with a FID of another shard, and not yet on this
        // node's copy of that shard.
        var moved: [(index: Int, shard: Int)] = []
        for index in guessed where results[index] == .failed(.notFound) {
            guard case .token(let token) = addresses[index] else { continue }
            switch await self.shard(of: token, in: project) {
            case .success(let shard?) where shard != shards[index]: moved.append((index, shard))
            case .success: continue
            case .failure: results[index] = .failed(.unavailable)
            }
        }
        guard !moved.isEmpty else { return .success(results) }
        switch await self.split(moved.map { registrations[$0.index] }, by: moved.map(\.shard), into: request, answers: answers) {
        case .success(let answered):
            for (item, answer) in zip(moved, answered) { results[item.index] = answer }
            return .success(results)
        case .failure(let refusal):
            return .failure(refusal)
        }
    }

    /// Where a registration goes: to the shard that holds its token if this node's copies of the
    /// shards know one (asking no other node: a registration is mostly of a new token); otherwise
    /// to its offered FID's shard; otherwise to its token's (so two registrations of one new token
    /// meet there); otherwise (neither given) to any shard, whose engine gives it a FID of its own.
    private func shard(registering fields: RegistrationFields, in project: String) -> Int {
        // The token the decoder kept, not one made again from its text.
        let token = fields.heldToken?.value(parsing: RegistrationToken.init)
        if let token, let holder = self.localShard(of: token, in: project) { return holder }
        if let fid = fields.offered?.fid(allowingLegacy: false) { return self.map.shard(of: fid) }
        if let token { return self.map.shard(of: token) }
        return Int.random(in: 0..<self.map.count)
    }

    /// The shard that knows `token` (holds it, or retired it): asked of this node's own copies of
    /// the shards first (every node follows every shard, a moment behind its owner), then of the
    /// owner of the token's own shard, where a new token registers, then of every other owner (a
    /// token registered with a FID of another shard a moment ago). Nil when none knows it;
    /// `UNAVAILABLE` when none that answered knows it and some did not answer (a failover): then
    /// nobody can say.
    private func shard(of token: RegistrationToken, in project: String) async -> Result<Int?, FanoutError> {
        if let shard = self.localShard(of: token, in: project) { return .success(shard) }
        let lookup = ClientRequest.getInstallation(project: project, registration: token.value)
        /// Whether the reply says the shard knows the token; nil when it did not answer.
        func knows(_ reply: ServerMessage) -> Bool? {
            switch reply {
            case .installation: return true
            case .error(let error) where error.code == .unregistered: return true
            case .error(let error) where error.code == .notFound: return false
            default: return nil
            }
        }
        let home = self.map.shard(of: token)
        let homeReply = await self.shards.perform(lookup, onShard: home)
        if knows(homeReply) == true { return .success(home) }
        let others = (0..<self.map.count).filter { $0 != home }
        let replies = [homeReply] + (await self.shards.perform(others.map { ($0, lookup) }))
        if let (shard, _) = zip([home] + others, replies).first(where: { knows($0.1) == true }) { return .success(shard) }
        if let silent = replies.first(where: { knows($0) == nil }) {
            let why = if case .error(let error) = silent { error.message } else { "an unexpected reply" }
            return .failure(FanoutError(.unavailable, "cannot tell which shard holds the token now (\(why)): try again"))
        }
        return .success(nil)
    }

    /// The shard whose copy on this node knows `token` (holds it, or retired it).
    private func localShard(of token: RegistrationToken, in project: String) -> Int? {
        self.localShards(of: [token], in: project)[0]
    }

    /// For each token, the shard whose copy on this node knows it, or nil: each shard's copy asked
    /// once for the tokens no copy before it knew.
    private func localShards(of tokens: [RegistrationToken], in project: String) -> [Int?] {
        var shards = [Int?](repeating: nil, count: tokens.count)
        guard let id = ProjectID(project) else { return shards }
        var unknown = Array(tokens.indices)
        for (shard, served) in self.node.servedShards.enumerated() where !unknown.isEmpty {
            let known = served.engine.knows(unknown.map { tokens[$0] }, in: id)
            for (index, isKnown) in zip(unknown, known) where isKnown { shards[index] = shard }
            unknown = zip(unknown, known).filter { !$0.1 }.map(\.0)
        }
        return shards
    }

    // MARK: - Sends

    /// A send to one token or FID goes to its shard; a send to anything else (a topic, a
    /// condition, a user, several recipients) to every shard, each queueing its part. A send that
    /// does not parse, or only validates, goes to shard 0, whose owner answers it.
    private func send(_ request: ClientRequest, body: [UInt8], in project: String) async -> ServerMessage {
        guard let parsed = try? MessageParser.parseSendRequest(body), !parsed.validateOnly else {
            return await self.shards.perform(request, onShard: 0)
        }
        switch parsed.message.target {
        case .fid(let fid):
            return await self.shards.perform(request, onShard: self.map.shard(of: fid))
        case .token(let token):
            switch await self.shard(of: token, in: project) {
            case .success(let shard): return await self.shards.perform(request, onShard: shard ?? self.map.shard(of: token))
            case .failure(let error): return .error(error)
            }
        case .topic, .condition, .user, .multicast:
            return Self.mergeSends(await self.shards.performOnEveryShard(request))
        }
    }

    // MARK: - Splitting and merging

    /// Items sent to their shards' owners in one request per shard, and the per-item answers put
    /// back in input order; or the reply of a shard's owner that did not answer one per item (an
    /// error: the client's reply then).
    private func split<Item, Answer>(
        _ items: [Item],
        by shards: [Int],
        into request: ([Item]) -> ClientRequest,
        answers: (ServerMessage) -> [Answer]?
    ) async -> Result<[Answer], Refusal> {
        var positions: [Int: [Int]] = [:]
        for (index, shard) in shards.enumerated() { positions[shard, default: []].append(index) }
        let groups = positions.sorted { $0.key < $1.key }
        let replies = await self.shards.perform(groups.map { (shard, indices) in (shard, request(indices.map { items[$0] })) })
        var merged = [Answer?](repeating: nil, count: items.count)
        for ((_, indices), reply) in zip(groups, replies) {
            guard let answers = answers(reply), answers.count == indices.count else { return .failure(Refusal(reply: reply)) }
            for (index, answer) in zip(indices, answers) { merged[index] = answer }
        }
        return .success(merged.compactMap { $0 })
    }

    /// A reply that stands for the whole request.
    struct Refusal: Error {
        let reply: ServerMessage
    }

    /// A project setting applied on every shard: done when every shard applied it. A create that
    /// some shards already had (a retry after a partial failure) is done too, as is a delete that
    /// some shards no longer had; the first other error is the reply.
    private static func settingOnEveryShard(_ replies: [ServerMessage], request: ClientRequest) -> ServerMessage {
        let tolerated: FanoutError.Code? = switch request {
        case .createProject: .alreadyExists
        case .deleteProject: .notFound
        default: nil
        }
        var done: ServerMessage?
        var toleratedError: ServerMessage?
        for reply in replies {
            guard case .error(let error) = reply else {
                done = done ?? reply
                continue
            }
            if error.code == tolerated {
                toleratedError = toleratedError ?? reply
                continue
            }
            return reply
        }
        return done ?? toleratedError ?? .error(FanoutError(.internal, "no shard answered"))
    }

    /// The first reply that is not the error `notFound` (the shard that had it), or that error.
    private static func first(_ replies: [ServerMessage], notFound: FanoutError.Code) -> ServerMessage {
        replies.first { if case .error(let error) = $0, error.code == notFound { false } else { true } } ?? replies.first ?? .error(FanoutError(.internal, "no shard answered"))
    }

    /// The shards' counts added up; the first error is the reply.
    private static func sum(_ replies: [ServerMessage], opcode: Opcode) -> ServerMessage {
        var total: UInt64 = 0
        for reply in replies {
            guard case .count(_, let count) = reply else { return reply }
            total += count
        }
        return .count(opcode, total)
    }

    /// The shards' pages of topics merged: subscriber counts added up per topic, in name order,
    /// `limit` at most (each shard's page holds its first `limit` names after the same point, so
    /// the merged first `limit` are among them).
    private static func mergeTopics(_ replies: [ServerMessage], limit: Int) -> ServerMessage {
        var counts: [String: UInt64] = [:]
        for reply in replies {
            guard case .topics(let topics) = reply else { return reply }
            for topic in topics { counts[topic.topic, default: 0] += topic.subscribers }
        }
        return .topics(counts.sorted { $0.key < $1.key }.prefix(limit).map { TopicCount(topic: $0.key, subscribers: $0.value) })
    }

    /// The shards' stale installations: their totals added up, the least recently seen `limit`.
    private static func mergeStale(_ replies: [ServerMessage], limit: Int) -> ServerMessage {
        var total: UInt64 = 0
        var installations: [Installation] = []
        for reply in replies {
            guard case .staleInstallations(let count, let some) = reply else { return reply }
            total += count
            installations += some
        }
        return .staleInstallations(total: total, Array(installations.sorted { $0.lastSeen < $1.lastSeen }.prefix(limit)))
    }

    /// The shards' statistics added up (a send that reached every shard counts once per shard).
    private static func sumStatistics(_ replies: [ServerMessage]) -> ServerMessage {
        var installations: UInt64 = 0
        var deliveries = DeliveryStatistics()
        var log = WALStatistics()
        for reply in replies {
            guard case .stats(let statistics) = reply else { return reply }
            installations += statistics.installations
            deliveries.add(statistics.deliveries)
            log.records += statistics.log.records
            log.batches += statistics.log.batches
            log.syncs += statistics.log.syncs
            log.bytes += statistics.log.bytes
        }
        return .stats(ProjectStatistics(installations: installations, deliveries: deliveries, log: log))
    }

    /// The shards' parts of one send: audiences and platform reports added up; per recipient,
    /// `ok` where the shard holding it queued it, otherwise the error of the shard that knew it
    /// (any error but `UNREGISTERED`), otherwise `UNREGISTERED`. The message id is that of the
    /// first shard the send reached (the first shard's when it reached none): each shard names its
    /// part with an id of its own (docs/scale-out.md). The first
    /// error is the reply (a send refused by one shard, as one over the quota, may have been
    /// queued by others).
    private static func mergeSends(_ replies: [ServerMessage]) -> ServerMessage {
        var merged: SendReceipt?
        for reply in replies {
            guard case .sent(let receipt) = reply else { return reply }
            guard var sum = merged else {
                merged = receipt
                continue
            }
            if sum.audience == 0, receipt.audience > 0 {
                // The reply names the part of the first shard the send reached.
                (sum.messageID, sum.sequence) = (receipt.messageID, receipt.sequence)
            }
            sum.audience += receipt.audience
            sum.enqueued += receipt.enqueued
            for (index, recipient) in receipt.recipients.enumerated() where index < sum.recipients.count {
                sum.recipients[index] = Self.merge(sum.recipients[index], recipient)
            }
            for report in receipt.platforms {
                guard let index = sum.platforms.firstIndex(where: { $0.platform == report.platform }) else {
                    sum.platforms.append(report)
                    continue
                }
                sum.platforms[index].add(report)
            }
            merged = sum
        }
        return merged.map(ServerMessage.sent) ?? .error(FanoutError(.internal, "no shard answered"))
    }

    private static func merge(_ a: RecipientResult, _ b: RecipientResult) -> RecipientResult {
        if a == .ok || b == .ok { return .ok }
        if a.code == .unregistered { return b }
        return a
    }
}

extension Result where Success == ServerMessage, Failure == ClusterRouter.Refusal {
    /// The reply, whichever it is.
    var reply: ServerMessage {
        switch self {
        case .success(let reply): reply
        case .failure(let refusal): refusal.reply
        }
    }
}

extension DeliveryStatistics {
    /// Adds another engine's counters (a cluster's shards).
    mutating func add(_ other: DeliveryStatistics) {
        self.sends += other.sends
        self.enqueued += other.enqueued
        self.delivered += other.delivered
        self.acknowledged += other.acknowledged
        self.expired += other.expired
        self.collapsed += other.collapsed
        self.dropped += other.dropped
        self.rejected += other.rejected
        self.skipped += other.skipped
        self.pending += other.pending
        self.messages += other.messages
        self.consumers += other.consumers
    }
}

extension PlatformSendReport {
    /// Adds another shard's part of the same send on this platform.
    mutating func add(_ other: PlatformSendReport) {
        self.audience += other.audience
        self.enqueued += other.enqueued
        self.refused += other.refused
        self.skippedWithoutToken += other.skippedWithoutToken
        self.skippedStale += other.skippedStale
        self.collapsed += other.collapsed
        self.dropped += other.dropped
        self.expired += other.expired
    }
}
