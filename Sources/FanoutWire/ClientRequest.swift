public import FanoutModel
public import NIOCore

/// Every request of the protocol (docs/wire-protocol.md section 5). Names of things travel as
/// strings; the server checks them with the engine's rules.
public enum ClientRequest: WireMessage {
    case hello(Hello)
    case ping
    case createProject(project: String)
    case deleteProject(project: String)
    case listProjects
    /// Writes a snapshot of every project (a key for all projects only).
    case snapshot
    /// The public keys that verify installation auth tokens, as a JWK Set (JSON).
    case jwks
    /// A new key signs auth tokens from now on; the one before still verifies its tokens.
    case rotateSigningKey
    /// Registers an installation; with `issuingCredentials`, the reply carries new installation
    /// credentials too (a refresh token and an auth token), as Firebase Installations' create does.
    case register(project: String, RegistrationFields, issuingCredentials: Bool = false)
    /// Up to 1000 registrations, each applied on its own (one result per item).
    case registerBatch(project: String, [RegistrationFields])
    /// As `registerBatch`, answered with each registered item's FID and flags only
    /// (REGISTER_BATCH_FIDS): what a bulk import needs, a tenth of the reply.
    case registerBatchFIDs(project: String, [RegistrationFields])
    case refreshToken(project: String, registration: String, token: String)
    case touch(project: String, registration: String)
    /// Sets an iOS installation's APNs device token (hex), or clears it with `nil`.
    case setAPNsToken(project: String, registration: String, apnsToken: String?)
    /// The installation an APNs device token (hex) belongs to.
    case installationByAPNsToken(project: String, apnsToken: String)
    /// New credentials for an installation: a refresh token and an auth token (the ones before stop working).
    case issueCredentials(project: String, registration: String)
    /// A new auth token for an installation (a device proves itself with its refresh token).
    case generateAuthToken(project: String, fid: String)
    case getInstallation(project: String, registration: String)
    case deleteInstallation(project: String, fid: String)
    case staleInstallations(project: String, limit: UInt32)
    case pruneExpired(project: String)
    case installationCount(project: String)
    case bindDevice(project: String, registration: String, user: String, anonymous: Bool)
    case signOut(project: String, user: String, registration: String)
    case linkUser(project: String, anonymous: String, permanent: String)
    case getUser(project: String, user: String)
    /// `dryRun`: list who would be removed, remove no one.
    case cleanUpAnonymousUsers(project: String, dryRun: Bool = false)
    /// Users in id order after `startAfter` (empty: from the first).
    case listUsers(project: String, startAfter: String, limit: UInt32)
    /// Turns the project's automatic anonymous clean-up on or off.
    case setAnonymousCleanUp(project: String, enabled: Bool)
    /// Whether the project accepts legacy 11-character Instance IDs as FIDs.
    case setLegacyInstanceIDs(project: String, accepted: Bool)
    case subscribe(project: String, topic: String, registrations: RegistrationList)
    case unsubscribe(project: String, topic: String, registrations: RegistrationList)
    case topicsOf(project: String, registration: String)
    case listTopics(project: String, startAfter: String, limit: UInt32)
    case subscriberCount(project: String, topic: String)
    /// How many installations a topic, a condition or a user reaches.
    case audience(project: String, AudienceTarget)
    /// `skipStale`: skip installations not seen for the server's stale age.
    case send(project: String, body: [UInt8], skipStale: Bool = false)
    case pending(project: String, registration: String)
    case expireDeliveries(project: String)
    case stats(project: String)
    /// `grouped`: ATTACH_GROUPED, whose stream comes as DELIVERIES frames (one message's envelope
    /// for many recipients) instead of one DELIVERY frame per delivery.
    case attach(project: String, scope: AttachScope, credit: UInt32, grouped: Bool = false)
    case grant(credit: UInt32)
    case acknowledge([DeliveryID])
    case detach

    /// REGISTER's options bit 0: answer with new installation credentials.
    static let registerIssuesCredentials: UInt8 = 1

    public var opcode: Opcode {
        switch self {
        case .hello: return .hello
        case .ping: return .ping
        case .createProject: return .createProject
        case .deleteProject: return .deleteProject
        case .listProjects: return .listProjects
        case .snapshot: return .snapshot
        case .jwks: return .jwks
        case .rotateSigningKey: return .rotateSigningKey
        case .issueCredentials: return .issueCredentials
        case .generateAuthToken: return .generateAuthToken
        case .register: return .register
        case .registerBatch: return .registerBatch
        case .registerBatchFIDs: return .registerBatchFIDs
        case .refreshToken: return .refreshToken
        case .touch: return .touch
        case .setAPNsToken: return .setAPNsToken
        case .installationByAPNsToken: return .installationByAPNsToken
        case .getInstallation: return .getInstallation
        case .deleteInstallation: return .deleteInstallation
        case .staleInstallations: return .staleInstallations
        case .pruneExpired: return .pruneExpired
        case .installationCount: return .installationCount
        case .bindDevice: return .bindDevice
        case .signOut: return .signOut
        case .linkUser: return .linkUser
        case .getUser: return .getUser
        case .cleanUpAnonymousUsers: return .cleanUpAnonymousUsers
        case .listUsers: return .listUsers
        case .setAnonymousCleanUp: return .setAnonymousCleanUp
        case .setLegacyInstanceIDs: return .setLegacyInstanceIDs
        case .subscribe: return .subscribe
        case .unsubscribe: return .unsubscribe
        case .topicsOf: return .topicsOf
        case .listTopics: return .listTopics
        case .subscriberCount: return .subscriberCount
        case .audience: return .audience
        case .send: return .send
        case .pending: return .pending
        case .expireDeliveries: return .expireDeliveries
        case .stats: return .stats
        case .attach(_, _, _, let grouped): return grouped ? .attachGrouped : .attach
        case .grant: return .grant
        case .acknowledge: return .acknowledge
        case .detach: return .detach
        }
    }

    /// The project a request is about, for the ones scoped to a project.
    public var project: String? {
        switch self {
        case .hello, .ping, .listProjects, .snapshot, .jwks, .rotateSigningKey, .grant, .acknowledge, .detach:
            return nil
        case .createProject(let project), .deleteProject(let project), .register(let project, _, _), .registerBatch(let project, _),
            .registerBatchFIDs(let project, _),
            .refreshToken(let project, _, _), .touch(let project, _), .getInstallation(let project, _),
            .setAPNsToken(let project, _, _), .installationByAPNsToken(let project, _),
            .issueCredentials(let project, _), .generateAuthToken(let project, _),
            .deleteInstallation(let project, _), .staleInstallations(let project, _), .pruneExpired(let project),
            .installationCount(let project), .bindDevice(let project, _, _, _), .signOut(let project, _, _),
            .linkUser(let project, _, _), .getUser(let project, _), .cleanUpAnonymousUsers(let project, _),
            .listUsers(let project, _, _), .setAnonymousCleanUp(let project, _), .setLegacyInstanceIDs(let project, _),
            .subscribe(let project, _, _), .unsubscribe(let project, _, _), .topicsOf(let project, _),
            .listTopics(let project, _, _), .subscriberCount(let project, _), .audience(let project, _), .send(let project, _, _),
            .pending(let project, _), .expireDeliveries(let project), .stats(let project),
            .attach(let project, _, _, _):
            return project
        }
    }

    // MARK: - Encoding

    public func encodePayload(into buffer: inout ByteBuffer) throws(ProtocolError) {
        if let project = self.project {
            try buffer.writeWireString(project, field: "project")
        }
        switch self {
        case .hello(let hello):
            buffer.writeInteger(hello.role.rawValue)
            let (kind, bytes): (UInt8, [UInt8])
            switch hello.credential {
            case .apiKey(let key): (kind, bytes) = (1, key)
            case .installationAuthToken(let token): (kind, bytes) = (2, token)
            case .installationRefreshToken(let token): (kind, bytes) = (3, token)
            case .unknown(let other, let credential): (kind, bytes) = (other, credential)
            }
            buffer.writeInteger(kind)
            try buffer.writeWireBytes(bytes, field: "credential")
            try buffer.writeWireString(hello.clientName, field: "clientName")
        case .ping, .listProjects, .snapshot, .jwks, .rotateSigningKey, .detach, .createProject, .deleteProject, .pruneExpired,
            .installationCount, .expireDeliveries, .stats:
            break
        case .issueCredentials(_, let registration):
            try buffer.writeWireString(registration, field: "registration")
        case .generateAuthToken(_, let fid):
            try buffer.writeWireString(fid, field: "fid")
        case .cleanUpAnonymousUsers(_, let dryRun):
            buffer.writeInteger(dryRun ? 1 : 0, as: UInt8.self)
        case .listUsers(_, let startAfter, let limit):
            try buffer.writeWireString(startAfter, field: "startAfter")
            buffer.writeInteger(limit)
        case .setAnonymousCleanUp(_, let enabled):
            buffer.writeWireBool(enabled)
        case .setLegacyInstanceIDs(_, let accepted):
            buffer.writeWireBool(accepted)
        case .register(_, let fields, let issuingCredentials):
            try buffer.writeWireRegistrationFields(fields)
            // The options byte may be left out when it is 0 (docs/wire-protocol.md).
            if issuingCredentials { buffer.writeInteger(Self.registerIssuesCredentials) }
        case .registerBatch(_, let items), .registerBatchFIDs(_, let items):
            try buffer.writeWireCount(items.count, field: "registrations")
            for fields in items { try buffer.writeWireRegistrationFields(fields) }
        case .refreshToken(_, let registration, let token):
            try buffer.writeWireString(registration, field: "registration")
            try buffer.writeWireString(token, field: "token")
        case .touch(_, let registration), .getInstallation(_, let registration), .topicsOf(_, let registration),
            .pending(_, let registration):
            try buffer.writeWireString(registration, field: "registration")
        case .setAPNsToken(_, let registration, let apnsToken):
            try buffer.writeWireString(registration, field: "registration")
            try buffer.writeWireOptionalString(apnsToken, field: "apnsToken")
        case .installationByAPNsToken(_, let apnsToken):
            try buffer.writeWireString(apnsToken, field: "apnsToken")
        case .deleteInstallation(_, let fid):
            try buffer.writeWireString(fid, field: "fid")
        case .staleInstallations(_, let limit):
            buffer.writeInteger(limit)
        case .bindDevice(_, let registration, let user, let anonymous):
            try buffer.writeWireString(registration, field: "registration")
            try buffer.writeWireString(user, field: "user")
            buffer.writeWireBool(anonymous)
        case .signOut(_, let user, let registration):
            try buffer.writeWireString(user, field: "user")
            try buffer.writeWireString(registration, field: "registration")
        case .linkUser(_, let anonymous, let permanent):
            try buffer.writeWireString(anonymous, field: "anonymousUser")
            try buffer.writeWireString(permanent, field: "permanentUser")
        case .getUser(_, let user):
            try buffer.writeWireString(user, field: "user")
        case .subscribe(_, let topic, let registrations), .unsubscribe(_, let topic, let registrations):
            try buffer.writeWireString(topic, field: "topic")
            try buffer.writeWireRegistrations(registrations, field: "registrations")
        case .listTopics(_, let startAfter, let limit):
            try buffer.writeWireString(startAfter, field: "startAfter")
            buffer.writeInteger(limit)
        case .subscriberCount(_, let topic):
            try buffer.writeWireString(topic, field: "topic")
        case .audience(_, let target):
            let (kind, value): (UInt8, String)
            switch target {
            case .topic(let topic): (kind, value) = (1, topic)
            case .condition(let condition): (kind, value) = (2, condition)
            case .user(let user): (kind, value) = (3, user)
            }
            buffer.writeInteger(kind)
            try buffer.writeWireString(value, field: "target")
        case .send(_, let body, let skipStale):
            buffer.writeInteger(skipStale ? 1 : 0, as: UInt8.self)
            try buffer.writeWireBytes(body, field: "body")
        case .attach(_, let scope, let credit, _):
            switch scope {
            case .platform(let platform):
                buffer.writeInteger(1, as: UInt8.self)
                buffer.writeInteger(platform.code)
            case .installations(let registrations):
                buffer.writeInteger(2, as: UInt8.self)
                try buffer.writeWireStrings(registrations, field: "registrations")
            }
            buffer.writeInteger(credit)
        case .grant(let credit):
            buffer.writeInteger(credit)
        case .acknowledge(let ids):
            try buffer.writeWireCount(ids.count, field: "deliveries")
            // In one write: a `ByteBuffer` write per id cost a uniqueness and an exclusivity
            // check each, a worker's ACK carrying thousands.
            buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: ids.count * 12) { raw in
                var out = RawWriter(raw)
                for id in ids {
                    out.integer(id.messageSequence)
                    out.integer(id.slot)
                }
                return out.offset
            }
        }
    }

    // MARK: - Decoding

    public static func decode(opcode: Opcode, payload: ByteBuffer, requestID: UInt32) throws(ProtocolError) -> ClientRequest {
        try PayloadReader.decodeWhole(payload, requestID: requestID, opcode: opcode) { (reader: inout PayloadReader) throws(ProtocolError) in
            try Self.decode(opcode: opcode, from: &reader)
        }
    }

    private static func decode(opcode: Opcode, from reader: inout PayloadReader) throws(ProtocolError) -> ClientRequest {
        switch opcode {
        case .hello:
            let roleByte = try reader.u8("role")
            guard let role = Hello.Role(rawValue: roleByte) else {
                throw reader.error("role \(roleByte) is unknown")
            }
            let kind = try reader.u8("credential kind")
            let bytes = try reader.bytes("credential")
            let credential: Hello.Credential
            switch kind {
            case 1: credential = .apiKey(bytes)
            case 2: credential = .installationAuthToken(bytes)
            case 3: credential = .installationRefreshToken(bytes)
            default: credential = .unknown(kind: kind, bytes)
            }
            let name = try reader.string("clientName")
            guard name.utf8.count <= Hello.maximumClientNameLength else {
                throw reader.error("client name is longer than \(Hello.maximumClientNameLength) bytes")
            }
            return .hello(Hello(role: role, credential: credential, clientName: name))
        case .ping: return .ping
        case .listProjects: return .listProjects
        case .snapshot: return .snapshot
        case .jwks: return .jwks
        case .rotateSigningKey: return .rotateSigningKey
        case .detach: return .detach
        case .grant: return .grant(credit: try reader.u32("credit"))
        case .acknowledge:
            let ids = try reader.list("deliveries", minimumElementSize: 12) { (reader: inout PayloadReader, field: () -> String) throws(ProtocolError) in
                DeliveryID(messageSequence: try reader.u64(field() + ".sequence"), slot: try reader.u32(field() + ".slot"))
            }
            return .acknowledge(ids)
        default:
            break
        }
        guard opcode.isRequest else {
            throw reader.error("not a request opcode")
        }
        let project: String
        switch opcode {
        case .createProject, .deleteProject, .register, .registerBatch, .registerBatchFIDs, .refreshToken, .touch, .setAPNsToken, .installationByAPNsToken,
            .issueCredentials, .generateAuthToken, .getInstallation, .deleteInstallation,
            .staleInstallations, .pruneExpired, .installationCount, .bindDevice, .signOut, .linkUser, .getUser,
            .cleanUpAnonymousUsers, .listUsers, .setAnonymousCleanUp, .setLegacyInstanceIDs, .subscribe, .unsubscribe, .topicsOf, .listTopics, .subscriberCount, .audience, .send,
            .pending, .expireDeliveries, .stats, .attach, .attachGrouped:
            project = try reader.string("project")
        default:
            throw reader.error("unknown opcode")
        }
        switch opcode {
        case .createProject: return .createProject(project: project)
        case .deleteProject: return .deleteProject(project: project)
        case .register:
            let fields = try reader.registrationFields("")
            guard !reader.isAtEnd else { return .register(project: project, fields) }
            let options = try reader.u8("options")
            guard options & ~Self.registerIssuesCredentials == 0 else {
                throw reader.error("options has unknown bits (\(options))")
            }
            return .register(project: project, fields, issuingCredentials: options & Self.registerIssuesCredentials != 0)
        case .registerBatch:
            return .registerBatch(project: project, try reader.registrationBatch())
        case .registerBatchFIDs:
            return .registerBatchFIDs(project: project, try reader.registrationBatch())
        case .refreshToken:
            return .refreshToken(project: project, registration: try reader.string("registration"), token: try reader.string("token"))
        case .touch: return .touch(project: project, registration: try reader.string("registration"))
        case .setAPNsToken:
            return .setAPNsToken(project: project, registration: try reader.string("registration"), apnsToken: try reader.optionalString("apnsToken"))
        case .installationByAPNsToken: return .installationByAPNsToken(project: project, apnsToken: try reader.string("apnsToken"))
        case .issueCredentials: return .issueCredentials(project: project, registration: try reader.string("registration"))
        case .generateAuthToken: return .generateAuthToken(project: project, fid: try reader.string("fid"))
        case .getInstallation: return .getInstallation(project: project, registration: try reader.string("registration"))
        case .deleteInstallation: return .deleteInstallation(project: project, fid: try reader.string("fid"))
        case .staleInstallations: return .staleInstallations(project: project, limit: try reader.u32("limit"))
        case .pruneExpired: return .pruneExpired(project: project)
        case .installationCount: return .installationCount(project: project)
        case .bindDevice:
            return .bindDevice(
                project: project,
                registration: try reader.string("registration"),
                user: try reader.string("user"),
                anonymous: try reader.bool("anonymous")
            )
        case .signOut: return .signOut(project: project, user: try reader.string("user"), registration: try reader.string("registration"))
        case .linkUser:
            return .linkUser(project: project, anonymous: try reader.string("anonymousUser"), permanent: try reader.string("permanentUser"))
        case .getUser: return .getUser(project: project, user: try reader.string("user"))
        case .cleanUpAnonymousUsers:
            let flags = try reader.u8("flags")
            guard flags & ~1 == 0 else { throw reader.error("clean-up flags \(flags) has bits this version does not define") }
            return .cleanUpAnonymousUsers(project: project, dryRun: flags & 1 != 0)
        case .listUsers: return .listUsers(project: project, startAfter: try reader.string("startAfter"), limit: try reader.u32("limit"))
        case .setAnonymousCleanUp: return .setAnonymousCleanUp(project: project, enabled: try reader.bool("enabled"))
        case .setLegacyInstanceIDs: return .setLegacyInstanceIDs(project: project, accepted: try reader.bool("accepted"))
        case .subscribe:
            return .subscribe(project: project, topic: try reader.string("topic"), registrations: try reader.registrations("registrations"))
        case .unsubscribe:
            return .unsubscribe(project: project, topic: try reader.string("topic"), registrations: try reader.registrations("registrations"))
        case .topicsOf: return .topicsOf(project: project, registration: try reader.string("registration"))
        case .listTopics: return .listTopics(project: project, startAfter: try reader.string("startAfter"), limit: try reader.u32("limit"))
        case .subscriberCount: return .subscriberCount(project: project, topic: try reader.string("topic"))
        case .audience:
            let kind = try reader.u8("kind")
            let value = try reader.string("target")
            switch kind {
            case 1: return .audience(project: project, .topic(value))
            case 2: return .audience(project: project, .condition(value))
            case 3: return .audience(project: project, .user(value))
            default: throw reader.error("audience kind \(kind) is unknown")
            }
        case .send:
            let flags = try reader.u8("flags")
            guard flags & ~1 == 0 else { throw reader.error("send flags \(flags) has bits this version does not define") }
            return .send(project: project, body: try reader.bytes("body"), skipStale: flags & 1 != 0)
        case .pending: return .pending(project: project, registration: try reader.string("registration"))
        case .expireDeliveries: return .expireDeliveries(project: project)
        case .stats: return .stats(project: project)
        default:  // .attach, .attachGrouped
            let scope: AttachScope
            switch try reader.u8("scope") {
            case 1: scope = .platform(try reader.platform("platform"))
            case 2: scope = .installations(try reader.strings("registrations"))
            case let other: throw reader.error("scope \(other) is unknown")
            }
            return .attach(project: project, scope: scope, credit: try reader.u32("credit"), grouped: opcode == .attachGrouped)
        }
    }
}
