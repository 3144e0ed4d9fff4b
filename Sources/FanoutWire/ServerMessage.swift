public import FanoutModel
public import NIOCore

/// Every frame a server sends (docs/wire-protocol.md section 5). Replies that share a payload
/// layout share a case and name the request they answer.
public enum ServerMessage: WireMessage {
    case welcome(Welcome)
    case pong
    /// An empty reply: CREATE_PROJECT, DELETE_PROJECT, ATTACH, GRANT, DETACH.
    case done(Opcode)
    /// A list of names: LIST_PROJECTS, CLEAN_UP_ANONYMOUS, TOPICS_OF, SNAPSHOT (the file's name).
    case names(Opcode, [String])
    case registered(RegistrationResult)
    /// REGISTER with the credentials option: the result and the installation's new credentials.
    case registeredWithCredentials(RegistrationResult, InstallationCredentials)
    /// REGISTER_BATCH: one outcome per item, in input order.
    case registeredBatch([RegistrationOutcome])
    /// REGISTER_BATCH_FIDS: one receipt per item, in input order.
    case registeredFIDs([RegistrationReceipt])
    /// REFRESH_TOKEN, TOUCH, GET_INSTALLATION, DELETE_INSTALLATION, BIND_DEVICE, SIGN_OUT.
    case installation(Opcode, Installation)
    /// How many are stale, and the least recently seen of them.
    case staleInstallations(total: UInt64, [Installation])
    /// PRUNE_EXPIRED, INSTALLATION_COUNT, SUBSCRIBER_COUNT, AUDIENCE, EXPIRE_DELIVERIES, ACK.
    case count(Opcode, UInt64)
    /// LINK_USER, GET_USER.
    case user(Opcode, User)
    /// LIST_USERS: each user's id, kind, creation, last activity and device count.
    case users([UserSummary])
    /// SET_ANONYMOUS_CLEANUP: since when automatic clean-up is on, or `nil`: off.
    case anonymousCleanUp(Timestamp?)
    /// ISSUE_CREDENTIALS's answer.
    case credentials(InstallationCredentials)
    /// GENERATE_AUTH_TOKEN's answer.
    case authToken(AuthToken)
    /// SUBSCRIBE, UNSUBSCRIBE: one result per registration.
    case itemResults(Opcode, [BatchItemResult])
    case topics([TopicCount])
    case sent(SendReceipt)
    case pending([WireDelivery])
    case stats(ProjectStatistics)
    case delivery(WireDelivery)
    /// A DELIVERIES frame of an ATTACH_GROUPED stream, its groups expanded (the deliveries of a
    /// group share their headers and payload arrays). Encoding groups consecutive deliveries with
    /// equal envelopes; an in-flight flag is not carried (it is always false on a stream).
    case deliveries([WireDelivery])
    case goAway(FanoutError.Code, String)
    case error(FanoutError)

    public var opcode: Opcode {
        switch self {
        case .welcome: return Opcode.hello.reply
        case .pong: return Opcode.ping.reply
        case .done(let request), .names(let request, _), .installation(let request, _), .count(let request, _),
            .user(let request, _), .itemResults(let request, _):
            return request.reply
        case .registered, .registeredWithCredentials: return Opcode.register.reply
        case .registeredBatch: return Opcode.registerBatch.reply
        case .registeredFIDs: return Opcode.registerBatchFIDs.reply
        case .staleInstallations: return Opcode.staleInstallations.reply
        case .topics: return Opcode.listTopics.reply
        case .sent: return Opcode.send.reply
        case .pending: return Opcode.pending.reply
        case .stats: return Opcode.stats.reply
        case .users: return Opcode.listUsers.reply
        case .anonymousCleanUp: return Opcode.setAnonymousCleanUp.reply
        case .credentials: return Opcode.issueCredentials.reply
        case .authToken: return Opcode.generateAuthToken.reply
        case .delivery: return .delivery
        case .deliveries: return .deliveries
        case .goAway: return .goAway
        case .error: return .error
        }
    }

    /// The reply layout of each request.
    enum ReplyLayout {
        case welcome, pong, done, names, registered, registeredBatch, registeredFIDs, installation, staleInstallations, count, user, itemResults
        case topics, sent, pending, stats, users, anonymousCleanUp, credentials, authToken

        init?(request: Opcode) {
            switch request {
            case .hello: self = .welcome
            case .ping: self = .pong
            case .createProject, .deleteProject, .setLegacyInstanceIDs, .attach, .attachGrouped, .grant, .detach: self = .done
            case .listProjects, .cleanUpAnonymousUsers, .topicsOf, .snapshot, .jwks, .rotateSigningKey: self = .names
            case .register: self = .registered
            case .registerBatch: self = .registeredBatch
            case .registerBatchFIDs: self = .registeredFIDs
            case .refreshToken, .touch, .setAPNsToken, .installationByAPNsToken, .getInstallation, .deleteInstallation, .bindDevice, .signOut:
                self = .installation
            case .staleInstallations: self = .staleInstallations
            case .pruneExpired, .installationCount, .subscriberCount, .audience, .expireDeliveries, .acknowledge: self = .count
            case .linkUser, .getUser: self = .user
            case .subscribe, .unsubscribe: self = .itemResults
            case .listTopics: self = .topics
            case .send: self = .sent
            case .pending: self = .pending
            case .stats: self = .stats
            case .listUsers: self = .users
            case .setAnonymousCleanUp: self = .anonymousCleanUp
            case .issueCredentials: self = .credentials
            case .generateAuthToken: self = .authToken
            default: return nil
            }
        }
    }

    // MARK: - Encoding

    public func encodePayload(into buffer: inout ByteBuffer) throws(ProtocolError) {
        switch self {
        case .welcome(let welcome):
            buffer.writeMultipleIntegers(
                welcome.version,
                welcome.maximumPayloadSize,
                welcome.idleTimeoutMilliseconds,
                welcome.maximumCredit,
                welcome.maximumInFlight
            )
            try buffer.writeWireStrings(welcome.projects, field: "projects")
        case .pong, .done:
            break
        case .names(_, let names):
            try buffer.writeWireStrings(names, field: "names")
        case .registered(let result):
            try buffer.writeWireRegistrationResult(result)
        case .registeredWithCredentials(let result, let credentials):
            try buffer.writeWireRegistrationResult(result, credentials: credentials)
        case .registeredBatch(let outcomes):
            try buffer.writeWireCount(outcomes.count, field: "results")
            for outcome in outcomes { try buffer.writeWireRegistrationOutcome(outcome) }
        case .registeredFIDs(let receipts):
            try buffer.writeWireCount(receipts.count, field: "results")
            for receipt in receipts { try buffer.writeWireRegistrationReceipt(receipt) }
        case .installation(_, let installation):
            try buffer.writeWireInstallation(installation)
        case .staleInstallations(let total, let installations):
            buffer.writeInteger(total)
            try buffer.writeWireCount(installations.count, field: "installations")
            for installation in installations { try buffer.writeWireInstallation(installation) }
        case .count(_, let count):
            buffer.writeInteger(count)
        case .user(_, let user):
            try buffer.writeWireString(user.id.value, field: "user")
            buffer.writeWireBool(user.isAnonymous)
            buffer.writeWireTimestamp(user.lastActive)
            buffer.writeWireTimestamp(user.createdAt)
            try buffer.writeWireCount(user.devices.count, field: "devices")
            for device in user.devices { try buffer.writeWireInstallation(device) }
        case .users(let users):
            try buffer.writeWireCount(users.count, field: "users")
            for user in users {
                try buffer.writeWireString(user.id, field: "user")
                buffer.writeWireBool(user.isAnonymous)
                buffer.writeWireTimestamp(user.createdAt)
                buffer.writeWireTimestamp(user.lastActive)
                buffer.writeInteger(UInt32(clamping: user.devices))
            }
        case .anonymousCleanUp(let since):
            buffer.writeWireBool(since != nil)
            if let since { buffer.writeWireTimestamp(since) }
        case .credentials(let credentials):
            try buffer.writeWireString(credentials.fid, field: "fid")
            try buffer.writeWireString(credentials.refreshToken, field: "refreshToken")
            try buffer.writeWireString(credentials.authToken.token, field: "authToken")
            buffer.writeWireTimestamp(credentials.authToken.expiresAt)
        case .authToken(let token):
            try buffer.writeWireString(token.token, field: "authToken")
            buffer.writeWireTimestamp(token.expiresAt)
        case .itemResults(_, let results):
            try buffer.writeWireItemResults(results)
        case .topics(let topics):
            try buffer.writeWireCount(topics.count, field: "topics")
            for topic in topics {
                try buffer.writeWireString(topic.topic, field: "topic")
                buffer.writeInteger(topic.subscribers)
            }
        case .sent(let receipt):
            try buffer.writeWireString(receipt.messageID, field: "message id")
            buffer.writeMultipleIntegers(receipt.sequence, receipt.audience, receipt.enqueued)
            try buffer.writeWireCount(receipt.recipients.count, field: "recipients")
            for recipient in receipt.recipients { try buffer.writeWireRecipientResult(recipient) }
            try buffer.writeWireCount(receipt.platforms.count, field: "platforms")
            for report in receipt.platforms { buffer.writeWirePlatformReport(report) }
        case .pending(let deliveries):
            try buffer.writeWireCount(deliveries.count, field: "deliveries")
            for delivery in deliveries { try buffer.writeWireDelivery(delivery) }
        case .stats(let stats):
            let d = stats.deliveries
            buffer.writeMultipleIntegers(
                stats.installations, UInt64(d.sends), UInt64(d.enqueued), UInt64(d.delivered), UInt64(d.acknowledged),
                UInt64(d.expired), UInt64(d.collapsed)
            )
            buffer.writeMultipleIntegers(UInt64(d.dropped), UInt64(d.rejected), UInt64(d.skipped), UInt64(d.pending), UInt64(d.messages), UInt64(d.consumers))
            let log = stats.log
            buffer.writeMultipleIntegers(UInt64(log.records), UInt64(log.batches), UInt64(log.syncs), UInt64(log.bytes))
            let c = stats.connections
            buffer.writeMultipleIntegers(c.accepted, c.refusedOverPendingLimit, c.handshakeTimeouts, c.authenticationFailures, c.delayedAuthentications)
        case .delivery(let delivery):
            try buffer.writeWireDelivery(delivery)
        case .deliveries(let deliveries):
            try buffer.writeWireDeliveryGroups(deliveries)
        case .goAway(let code, let reason):
            buffer.writeInteger(code.wireValue)
            try buffer.writeWireString(reason, field: "reason")
        case .error(let error):
            try buffer.writeWireError(error)
        }
    }

    // MARK: - Decoding

    public static func decode(opcode: Opcode, payload: ByteBuffer, requestID: UInt32) throws(ProtocolError) -> ServerMessage {
        try PayloadReader.decodeWhole(payload, requestID: requestID, opcode: opcode) { (reader: inout PayloadReader) throws(ProtocolError) in
            try Self.decode(opcode: opcode, from: &reader)
        }
    }

    private static func decode(opcode: Opcode, from reader: inout PayloadReader) throws(ProtocolError) -> ServerMessage {
        switch opcode {
        case .delivery:
            return .delivery(try reader.delivery("delivery"))
        case .deliveries:
            return .deliveries(try reader.deliveryGroups("groups"))
        case .goAway:
            return .goAway(FanoutError.Code(wireValue: try reader.u8("status")), try reader.string("reason"))
        case .error:
            let code = FanoutError.Code(wireValue: try reader.u8("status"))
            return .error(try reader.errorDetails(code, "error"))
        default:
            break
        }
        let request = opcode.request
        guard opcode.rawValue >= 0x80, let layout = ReplyLayout(request: request) else {
            throw reader.error("not a server opcode")
        }
        switch layout {
        case .welcome:
            let version = try reader.u16("version")
            return .welcome(Welcome(
                version: version,
                maximumPayloadSize: try reader.u32("maximum frame size"),
                idleTimeoutMilliseconds: try reader.u32("idle timeout"),
                maximumCredit: try reader.u32("maximum credit"),
                maximumInFlight: try reader.u32("maximum in flight"),
                projects: try reader.strings("projects")
            ))
        case .pong: return .pong
        case .done: return .done(request)
        case .names: return .names(request, try reader.strings("names"))
        case .registered:
            let (result, credentialsFollow) = try reader.registrationResult("registration", credentialsMayFollow: true)
            guard credentialsFollow else { return .registered(result) }
            let refreshToken = try reader.string("refreshToken")
            let token = try reader.string("authToken")
            let authToken = AuthToken(token: token, expiresAt: try reader.timestamp("expiresAt"))
            return .registeredWithCredentials(result, InstallationCredentials(fid: result.installation.fid.description, refreshToken: refreshToken, authToken: authToken))
        case .registeredBatch:
            return .registeredBatch(try reader.list("results", minimumElementSize: 2) { (reader: inout PayloadReader, field: () -> String) throws(ProtocolError) in
                try reader.registrationOutcome(field())
            })
        case .registeredFIDs:
            return .registeredFIDs(try reader.list("results", minimumElementSize: 2) { (reader: inout PayloadReader, field: () -> String) throws(ProtocolError) in
                try reader.registrationReceipt(field())
            })
        case .installation: return .installation(request, try reader.installation("installation"))
        case .staleInstallations:
            let total = try reader.u64("total")
            return .staleInstallations(total: total, try reader.installations("installations"))
        case .count: return .count(request, try reader.u64("count"))
        case .user:
            let id = try reader.model("user", UserID.init)
            let anonymous = try reader.bool("anonymous")
            let lastActive = try reader.timestamp("last active")
            let createdAt = try reader.timestamp("created at")
            return .user(request, User(id: id, isAnonymous: anonymous, devices: try reader.installations("devices"), lastActive: lastActive, createdAt: createdAt))
        case .users:
            return .users(try reader.list("users", minimumElementSize: 23) { (reader: inout PayloadReader, field: () -> String) throws(ProtocolError) in
                UserSummary(
                    id: try reader.string(field() + ".id"), isAnonymous: try reader.bool(field() + ".anonymous"),
                    createdAt: try reader.timestamp(field() + ".created at"), lastActive: try reader.timestamp(field() + ".last active"),
                    devices: Int(try reader.u32(field() + ".devices"))
                )
            })
        case .anonymousCleanUp:
            return .anonymousCleanUp(try reader.bool("enabled") ? try reader.timestamp("since") : nil)
        case .credentials:
            let fid = try reader.string("fid")
            let refreshToken = try reader.string("refreshToken")
            let token = try reader.string("authToken")
            return .credentials(InstallationCredentials(fid: fid, refreshToken: refreshToken, authToken: AuthToken(token: token, expiresAt: try reader.timestamp("expiresAt"))))
        case .authToken:
            let token = try reader.string("authToken")
            return .authToken(AuthToken(token: token, expiresAt: try reader.timestamp("expiresAt")))
        case .itemResults: return .itemResults(request, try reader.itemResults("results"))
        case .topics:
            return .topics(try reader.list("topics", minimumElementSize: 10) { (reader: inout PayloadReader, field: () -> String) throws(ProtocolError) in
                TopicCount(topic: try reader.string(field() + ".topic"), subscribers: try reader.u64(field() + ".subscribers"))
            })
        case .sent:
            let id = try reader.string("message id")
            let sequence = try reader.u64("sequence")
            let audience = try reader.u32("audience")
            let enqueued = try reader.u32("enqueued")
            let recipients = try reader.list("recipients") { (reader: inout PayloadReader, field: () -> String) throws(ProtocolError) in
                try reader.recipientResult(field())
            }
            let platforms = try reader.list("platforms", minimumElementSize: 41) { (reader: inout PayloadReader, field: () -> String) throws(ProtocolError) in
                try reader.platformReport(field())
            }
            return .sent(SendReceipt(messageID: id, sequence: sequence, audience: audience, enqueued: enqueued, recipients: recipients, platforms: platforms))
        case .pending:
            return .pending(try reader.list("deliveries", minimumElementSize: 30) { (reader: inout PayloadReader, field: () -> String) throws(ProtocolError) in
                try reader.delivery(field())
            })
        case .stats:
            let installations = try reader.u64("installations")
            var d = DeliveryStatistics()
            d.sends = try reader.count64("sends")
            d.enqueued = try reader.count64("enqueued")
            d.delivered = try reader.count64("delivered")
            d.acknowledged = try reader.count64("acknowledged")
            d.expired = try reader.count64("expired")
            d.collapsed = try reader.count64("collapsed")
            d.dropped = try reader.count64("dropped")
            d.rejected = try reader.count64("rejected")
            d.skipped = try reader.count64("skipped")
            d.pending = try reader.count64("pending")
            d.messages = try reader.count64("messages")
            d.consumers = try reader.count64("consumers")
            var log = WALStatistics()
            log.records = try reader.count64("log records")
            log.batches = try reader.count64("log batches")
            log.syncs = try reader.count64("log syncs")
            log.bytes = try reader.count64("log bytes")
            var c = ConnectionStatistics()
            c.accepted = try reader.u64("connections accepted")
            c.refusedOverPendingLimit = try reader.u64("connections refused")
            c.handshakeTimeouts = try reader.u64("handshake timeouts")
            c.authenticationFailures = try reader.u64("authentication failures")
            c.delayedAuthentications = try reader.u64("delayed authentications")
            return .stats(ProjectStatistics(installations: installations, deliveries: d, log: log, connections: c))
        }
    }
}

/// An installation auth token and when it expires.
public struct AuthToken: Hashable, Sendable {
    public var token: String
    public var expiresAt: Timestamp

    public init(token: String, expiresAt: Timestamp) {
        self.token = token
        self.expiresAt = expiresAt
    }
}

/// What ISSUE_CREDENTIALS gives an installation: its refresh token (shown once; the server keeps
/// its hash) and a first auth token.
public struct InstallationCredentials: Hashable, Sendable {
    public var fid: String
    public var refreshToken: String
    public var authToken: AuthToken

    public init(fid: String, refreshToken: String, authToken: AuthToken) {
        self.fid = fid
        self.refreshToken = refreshToken
        self.authToken = authToken
    }
}
