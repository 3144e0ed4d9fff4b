internal import FanoutCore
internal import FanoutModel
internal import FanoutWire

/// Users on a cluster (docs/scale-out.md, "Users across shards"): a user lives with its devices,
/// so a user whose devices are on several shards has a part on each (its record there: kind,
/// devices, first bind, last activity). A change to one device goes to the device's shard; a read
/// of a user, a listing and a clean-up go to every shard and merge the parts; a link goes to every
/// shard holding a part of the anonymous user.
extension ClusterRouter {
    /// BIND_DEVICE: checked against the user's parts on every shard (a user is anonymous or
    /// permanent cluster-wide), then applied on the device's shard.
    func bind(_ request: ClientRequest, registration: String, user: String, anonymous: Bool, in project: String) async -> ServerMessage {
        let parts = await self.shards.performOnEveryShard(.getUser(project: project, user: user))
        switch Self.mergeUsers(parts, opcode: .getUser) {
        case .user(_, let existing) where existing.isAnonymous != anonymous:
            return .error(.userOfTheOtherKind(isAnonymous: existing.isAnonymous))
        case .error(let error) where error.code == .unavailable:
            // A shard that may hold a part of the user did not answer: the kind is not known.
            return .error(error)
        default:
            // An unknown user, or a bad request: the device's shard answers it as one engine does.
            return await self.performOnShard(of: registration, request, in: project)
        }
    }

    /// LINK_USER: the permanent user's kind checked on every shard, the link applied on every
    /// shard holding a part of the anonymous user, then the permanent user read back whole. A
    /// shard that fails after others linked leaves the link partly done: sent again, it finishes
    /// on the shards still holding the anonymous user.
    func link(_ request: ClientRequest, anonymous: String, permanent: String, in project: String) async -> ServerMessage {
        async let anonymousParts = self.shards.performOnEveryShard(.getUser(project: project, user: anonymous))
        async let permanentParts = self.shards.performOnEveryShard(.getUser(project: project, user: permanent))
        let holders = (await anonymousParts).enumerated().compactMap { shard, reply in
            if case .user = reply { shard } else { nil }
        }
        // The checks in one engine's order: the shards check the ids and the anonymous user; the
        // permanent user's kind is checked here, over all its parts.
        if anonymous != permanent, case .user(_, let source) = Self.mergeUsers(await anonymousParts, opcode: .getUser), source.isAnonymous,
            case .user(_, let target) = Self.mergeUsers(await permanentParts, opcode: .getUser), target.isAnonymous
        {
            return .error(.linkTargetIsAnonymous)
        }
        // No shard holds it (or the ids are bad): shard 0 answers why.
        guard !holders.isEmpty else { return await self.shards.perform(request, onShard: 0) }
        for reply in await self.shards.perform(holders.map { ($0, request) }) {
            guard case .user = reply else { return reply }
        }
        switch Self.mergeUsers(await self.shards.performOnEveryShard(.getUser(project: project, user: permanent)), opcode: .linkUser) {
        case .user(_, let user): return .user(.linkUser, user)
        case let other: return other
        }
    }

    /// A user's parts merged: its devices shard after shard (each shard's in bind order), its
    /// first bind the earliest, its last activity the latest. `NOT_FOUND` when no shard has it;
    /// another error of any shard is the reply.
    static func mergeUsers(_ replies: [ServerMessage], opcode: Opcode) -> ServerMessage {
        var merged: User?
        var notFound: ServerMessage?
        for reply in replies {
            switch reply {
            case .user(_, let part):
                guard var user = merged else {
                    merged = part
                    continue
                }
                user.devices += part.devices
                user.createdAt = min(user.createdAt, part.createdAt)
                user.lastActive = max(user.lastActive, part.lastActive)
                merged = user
            case .error(let error) where error.code == .notFound:
                notFound = notFound ?? reply
            default:
                return reply
            }
        }
        return merged.map { .user(opcode, $0) } ?? notFound ?? .error(FanoutError(.internal, "no shard answered"))
    }

    /// The shards' pages of users merged: each user's parts summed up, in id order, `limit` at
    /// most (each shard's page holds its first `limit` users after the same point, so the merged
    /// first `limit`, with every part of each, are among them).
    static func mergeUserPages(_ replies: [ServerMessage], limit: Int) -> ServerMessage {
        var users: [String: UserSummary] = [:]
        for reply in replies {
            guard case .users(let page) = reply else { return reply }
            for part in page {
                guard var user = users[part.id] else {
                    users[part.id] = part
                    continue
                }
                user.devices += part.devices
                user.createdAt = min(user.createdAt, part.createdAt)
                user.lastActive = max(user.lastActive, part.lastActive)
                users[part.id] = user
            }
        }
        return .users(users.values.sorted { $0.id < $1.id }.prefix(limit).map { $0 })
    }

    /// The shards' lists of names (the users a clean-up removed) as one sorted list without repeats.
    static func mergeNames(_ replies: [ServerMessage], opcode: Opcode) -> ServerMessage {
        var names: Set<String> = []
        for reply in replies {
            guard case .names(_, let some) = reply else { return reply }
            names.formUnion(some)
        }
        return .names(opcode, names.sorted())
    }
}
