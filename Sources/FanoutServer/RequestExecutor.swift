internal import FanoutCore
internal import FanoutKeys
internal import FanoutWire

/// Performs the engine's operations for requests (everything but the consumer's, which belong to
/// the connection), turning the wire's strings into the engine's checked names. Changes are
/// applied through `changes` (their replies wait for the log); reads answer at once. Errors name the
/// field and never contain a token.
struct RequestExecutor: Sendable {
    let engine: Engine
    let maximumPayloadSize: Int
    /// Issues and verifies installation credentials; nil when the server issues none.
    var tokens: InstallationTokens? = nil
    /// The server's connection counters, for STATS.
    var strangers: StrangerLimits? = nil

    func execute(_ request: ClientRequest, principal: Principal, changes: inout Engine.Changes) throws(FanoutError) -> ServerMessage {
        let opcode = request.opcode
        switch request {
        case .jwks:
            do {
                return .names(opcode, [try self.credentialTokens().keys.jwks()])
            } catch {
                throw FanoutError(.internal, "the JWK Set could not be written")
            }
        case .rotateSigningKey:
            let tokens = try self.credentialTokens()
            do {
                let id = try tokens.keys.rotate(now: self.seconds)
                try tokens.keys.prune(now: self.seconds, tokenLifetime: tokens.lifetime)
                return .names(opcode, [id])
            } catch {
                throw FanoutError(.unavailable, "the new signing key could not be written")
            }
        case .issueCredentials(let project, let registration):
            let tokens = try self.credentialTokens()
            let id = try Self.project(project)
            let installation = try self.engine.installation(try Self.address(registration), in: id)
            return .credentials(try tokens.issueCredentials(for: installation, in: id, changes: &changes, now: self.seconds))
        case .generateAuthToken(let project, let fid):
            var presented: RefreshToken? = nil
            if case .refresh(let token) = principal { presented = token }
            return .authToken(try self.credentialTokens().generateAuthToken(
                for: try Self.fid(fid), in: try Self.project(project), engine: self.engine, presented: presented, now: self.seconds
            ))
        case .createProject(let project):
            try changes.createProject(try Self.project(project))
            return .done(opcode)
        case .deleteProject(let project):
            try changes.deleteProject(try Self.project(project))
            return .done(opcode)
        case .listProjects:
            return .names(opcode, self.engine.projectIDs().map(\.value).filter { principal.projects.contains($0) })
        case .register(let project, let fields, let issuingCredentials):
            let isApp = principal.kind == .app
            guard issuingCredentials else {
                if isApp { throw FanoutError(.permissionDenied, "an app key registers with the credentials option (options bit 0)", field: "options") }
                return .registered(try changes.register(try Self.registration(fields), in: try Self.project(project)))
            }
            let (result, credentials) = try self.credentialTokens().register(
                try Self.registration(fields), in: try Self.project(project), creatingOnly: isApp, changes: &changes, now: self.seconds
            )
            return .registeredWithCredentials(result, credentials)
        case .registerBatch(let project, let items):
            // Each result is moved into its outcome (`popLast` moves it; a `map` would copy each
            // result's strings and release them again), then the outcomes are put back in order.
            let id = try Self.project(project)
            var results = try changes.register(try self.registrationItems(items), in: id)
            var outcomes: [RegistrationOutcome] = []
            outcomes.reserveCapacity(results.count)
            while let result = results.popLast() {
                switch result {
                case .success(let registered): outcomes.append(.registered(registered))
                case .failure(let error): outcomes.append(.failed(error))
                }
            }
            outcomes.reverse()
            return .registeredBatch(outcomes)
        case .registerBatchFIDs(let project, let items):
            let id = try Self.project(project)
            return .registeredFIDs(try changes.registerReturningFIDs(try self.registrationItems(items), in: id))
        case .refreshToken(let project, let registration, let token):
            let token = try Self.parse(token, "token", RegistrationToken.init)
            return .installation(opcode, try changes.refreshToken(try Self.address(registration), to: token, in: try Self.project(project)))
        case .touch(let project, let registration):
            return .installation(opcode, try changes.touch(try Self.address(registration), in: try Self.project(project)))
        case .setAPNsToken(let project, let registration, let apnsToken):
            let token = try apnsToken.map { (hex: String) throws(FanoutError) in try Self.parse(hex, "apnsToken", APNsDeviceToken.init) }
            return .installation(opcode, try changes.setAPNsToken(token, of: try Self.address(registration), in: try Self.project(project)))
        case .installationByAPNsToken(let project, let apnsToken):
            let token = try Self.parse(apnsToken, "apnsToken", APNsDeviceToken.init)
            return .installation(opcode, try self.engine.installation(forAPNsToken: token, in: try Self.project(project)))
        case .getInstallation(let project, let registration):
            return .installation(opcode, try self.engine.installation(try Self.address(registration), in: try Self.project(project)))
        case .deleteInstallation(let project, let fid):
            return .installation(opcode, try changes.deleteInstallation(try Self.fid(fid), in: try Self.project(project)))
        case .staleInstallations(let project, let limit):
            guard (1...1000).contains(limit) else {
                throw FanoutError(.invalidArgument, "limit must be in 1...1000", field: "limit")
            }
            let stale = try self.engine.staleInstallations(in: try Self.project(project))
            return .staleInstallations(total: UInt64(stale.count), Array(stale.prefix(Int(limit))))
        case .pruneExpired(let project):
            return .count(opcode, UInt64(try changes.pruneExpiredInstallations(in: try Self.project(project)).count))
        case .installationCount(let project):
            return .count(opcode, UInt64(try self.engine.installationCount(in: try Self.project(project))))
        case .bindDevice(let project, let registration, let user, let anonymous):
            return .installation(opcode, try changes.bindDevice(
                try Self.address(registration),
                to: try Self.parse(user, "user", UserID.init),
                anonymous: anonymous,
                in: try Self.project(project)
            ))
        case .signOut(let project, let user, let registration):
            return .installation(opcode, try changes.signOut(
                try Self.parse(user, "user", UserID.init),
                on: try Self.address(registration),
                in: try Self.project(project)
            ))
        case .linkUser(let project, let anonymous, let permanent):
            return .user(opcode, try changes.linkUser(
                anonymous: try Self.parse(anonymous, "anonymousUser", UserID.init),
                to: try Self.parse(permanent, "permanentUser", UserID.init),
                in: try Self.project(project)
            ))
        case .getUser(let project, let user):
            return .user(opcode, try self.engine.user(try Self.parse(user, "user", UserID.init), in: try Self.project(project)))
        case .cleanUpAnonymousUsers(let project, let dryRun):
            let id = try Self.project(project)
            let users = dryRun ? try self.engine.anonymousUsersDueForCleanUp(in: id) : try changes.cleanUpAnonymousUsers(in: id)
            return .names(opcode, users.map(\.value))
        case .listUsers(let project, let startAfter, let limit):
            guard (1...1000).contains(limit) else {
                throw FanoutError(.invalidArgument, "limit must be in 1...1000", field: "limit")
            }
            let after = startAfter.isEmpty ? nil : try Self.parse(startAfter, "startAfter", UserID.init)
            let users = try self.engine.users(after: after, limit: Int(limit), in: try Self.project(project))
            return .users(users.map {
                UserSummary(id: $0.id.value, isAnonymous: $0.isAnonymous, createdAt: $0.createdAt, lastActive: $0.lastActive, devices: $0.devices.count)
            })
        case .setLegacyInstanceIDs(let project, let accepted):
            try changes.setLegacyInstanceIDs(accepted, in: try Self.project(project))
            return .done(opcode)
        case .setAnonymousCleanUp(let project, let enabled):
            return .anonymousCleanUp(try changes.setAnonymousCleanUp(enabled, in: try Self.project(project)))
        case .subscribe(let project, let topic, let registrations):
            return .itemResults(opcode, try changes.subscribe(
                registrations,
                to: try Self.parse(topic, "topic", TopicName.init),
                in: try Self.project(project)
            ))
        case .unsubscribe(let project, let topic, let registrations):
            return .itemResults(opcode, try changes.unsubscribe(
                registrations,
                from: try Self.parse(topic, "topic", TopicName.init),
                in: try Self.project(project)
            ))
        case .topicsOf(let project, let registration):
            return .names(opcode, try self.engine.topics(of: try Self.address(registration), in: try Self.project(project)).map(\.value))
        case .listTopics(let project, let startAfter, let limit):
            guard (1...10_000).contains(limit) else {
                throw FanoutError(.invalidArgument, "limit must be in 1...10000", field: "limit")
            }
            return .topics(self.page(try self.engine.listTopics(in: try Self.project(project)), after: startAfter, limit: Int(limit)))
        case .subscriberCount(let project, let topic):
            return .count(opcode, UInt64(try self.engine.subscriberCount(of: try Self.parse(topic, "topic", TopicName.init), in: try Self.project(project))))
        case .audience(let project, let target):
            let id = try Self.project(project)
            let audience: Audience
            switch target {
            case .topic(let topic): audience = try self.engine.audience(of: try Self.parse(topic, "topic", TopicName.init), in: id)
            case .condition(let condition): audience = try self.engine.audience(of: try Condition(parsing: condition), in: id)
            case .user(let user): audience = try self.engine.audience(of: try Self.parse(user, "user", UserID.init), in: id)
            }
            return .count(opcode, UInt64(audience.count))
        case .send(let project, let body, let skipStale):
            let result = try changes.send(body, in: try Self.project(project), options: SendOptions(skipStaleInstallations: skipStale))
            return .sent(SendReceipt(
                messageID: result.messageID,
                sequence: result.sequence,
                audience: UInt32(clamping: result.audience),
                enqueued: UInt32(clamping: result.enqueued),
                recipients: result.recipients,
                platforms: result.platforms
            ))
        case .pending(let project, let registration):
            return .pending(try self.engine.pendingDeliveries(for: try Self.address(registration), in: try Self.project(project)).map(WireDelivery.init))
        case .expireDeliveries(let project):
            return .count(opcode, UInt64(try changes.expireDeliveries(in: try Self.project(project))))
        case .stats(let project):
            let id = try Self.project(project)
            return .stats(ProjectStatistics(
                installations: UInt64(try self.engine.installationCount(in: id)),
                deliveries: try self.engine.deliveryStatistics(in: id),
                log: self.engine.logStatistics ?? WALStatistics(),
                connections: self.strangers?.statistics ?? ConnectionStatistics()
            ))
        case .hello, .ping, .snapshot, .attach, .grant, .acknowledge, .detach:
            throw FanoutError(.internal, "\(opcode) is handled by the connection")
        }
    }

    /// What a server without installation tokens answers a credentials request.
    static let issuesNoCredentials = FanoutError(.failedPrecondition, "this server issues no installation credentials")

    private func credentialTokens() throws(FanoutError) -> InstallationTokens {
        guard let tokens = self.tokens else { throw Self.issuesNoCredentials }
        return tokens
    }

    private var seconds: Int64 { self.engine.clock.now().secondsSinceEpoch }

    /// A page of topics after `startAfter`, at most `limit` and small enough for one frame.
    private func page(_ topics: [(name: TopicName, subscribers: Int)], after startAfter: String, limit: Int) -> [TopicCount] {
        var page: [TopicCount] = []
        var bytes = 4
        let budget = self.maximumPayloadSize - 64
        for topic in topics where topic.name.value > startAfter {
            bytes += 2 + topic.name.value.utf8.count + 8
            guard page.count < limit, bytes <= budget else { break }
            page.append(TopicCount(topic: topic.name.value, subscribers: UInt64(topic.subscribers)))
        }
        return page
    }

    // MARK: - From the wire's strings to the engine's names

    static func parse<Value>(_ string: String, _ field: String, _ make: (String) -> Value?) throws(FanoutError) -> Value {
        guard let value = make(string) else {
            throw FanoutError(.invalidArgument, "\(field) is not valid", field: field)
        }
        return value
    }

    /// A FID, or a legacy Instance ID (which only exists where its project accepted it).
    static func fid(_ string: String) throws(FanoutError) -> FID {
        try Self.parse(string, "fid") { FID($0, allowingLegacy: true) }
    }

    static func project(_ string: String) throws(FanoutError) -> ProjectID {
        try Self.parse(string, "project", ProjectID.init)
    }

    static func address(_ string: String, field: String = "registration") throws(FanoutError) -> RegistrationAddress {
        guard let address = RegistrationAddress(parsing: string) else {
            throw FanoutError(.invalidArgument, "\(field) is neither a FID nor a registration token", field: field)
        }
        return address
    }

    static func scope(_ scope: AttachScope) throws(FanoutError) -> ConsumerScope {
        switch scope {
        case .platform(let platform):
            return .platform(platform)
        case .installations(let registrations):
            var addresses: [RegistrationAddress] = []
            for (index, registration) in registrations.enumerated() {
                addresses.append(try Self.address(registration, field: "registrations[\(index)]"))
            }
            return .installations(addresses)
        }
    }

    /// REGISTER_BATCH's (and REGISTER_BATCH_FIDS's) registrations, each checked on its own: a
    /// field that does not parse refuses that item only. An empty batch or one past the maximum
    /// refuses the request.
    private func registrationItems(_ items: [RegistrationFields]) throws(FanoutError) -> RegistrationItems {
        guard !items.isEmpty else {
            throw FanoutError(.invalidArgument, "a batch needs at least one registration", field: "registrations")
        }
        try EngineConfiguration.checkBatchSize(items.count, maximum: self.engine.configuration.maximumBatchSize)
        var requests = RegistrationItems()
        requests.reserveCapacity(items.count)
        for fields in items {
            do throws(FanoutError) {
                requests.append(try Self.registration(fields))
            } catch {
                requests.append(refused: error)
            }
        }
        return requests
    }

    /// A decoded field, checked (the decoder checked a value it holds already).
    private static func checked<Value>(_ decoded: Decoded<Value>, _ field: String, _ make: (String) -> Value?) throws(FanoutError) -> Value {
        switch decoded {
        case .value(let value): value
        case .text(let text): try Self.parse(text, field, make)
        }
    }

    /// A registration's fields checked into the engine's request; an error names the field.
    static func registration(_ fields: RegistrationFields) throws(FanoutError) -> RegistrationRequest {
        // No device details, nothing to check or copy (the three strings passed to the
        // initializer were three retains and releases per registration).
        let noDevice = fields.deviceName == nil && fields.deviceOS == nil && fields.deviceType == nil
        return RegistrationRequest(
            offered: fields.offered,
            token: try fields.heldToken.map { (token: Decoded<RegistrationToken>) throws(FanoutError) in try Self.checked(token, "token", RegistrationToken.init) },
            platform: fields.platform,
            appID: try Self.checked(fields.heldAppID, "appId", AppID.init),
            device: noDevice ? DeviceDetails() : try DeviceDetails(name: fields.deviceName, os: fields.deviceOS, type: fields.deviceType),
            apnsToken: try fields.apnsToken.map { (hex: String) throws(FanoutError) in try Self.parse(hex, "apnsToken", APNsDeviceToken.init) }
        )
    }
}
