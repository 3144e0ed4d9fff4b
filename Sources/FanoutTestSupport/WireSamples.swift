public import FanoutCore
public import FanoutWire

/// Random values of every message of both directions, from a seeded generator (wire tests).
public struct WireSamples {
    public var random: SeededRandomNumberGenerator

    public init(seed: UInt64) {
        self.random = SeededRandomNumberGenerator(seed: seed)
    }

    public mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &self.random) }
    public mutating func bool() -> Bool { Bool.random(using: &self.random) }
    public mutating func u32() -> UInt32 { UInt32.random(in: 0...UInt32.max, using: &self.random) }
    public mutating func u64() -> UInt64 { self.random.next() }

    /// Any string, including multi-byte UTF-8.
    public mutating func string(maximum: Int = 24) -> String {
        let alphabet: [Character] = Array("abcXYZ09-_:.' é日本🙂")
        return String((0..<self.int(0...maximum)).map { _ in alphabet[self.int(0...(alphabet.count - 1))] })
    }

    public mutating func optionalString() -> String? { self.bool() ? self.string() : nil }
    public mutating func strings() -> [String] { (0..<self.int(0...5)).map { _ in self.string() } }
    public mutating func platform() -> Platform { Platform.allCases[self.int(0...2)] }
    public mutating func bytes() -> [UInt8] { self.random.bytes(self.int(0...64)) }

    public mutating func fid() -> FID {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        let first = Array("cdef")[self.int(0...3)]
        let rest = (0..<21).map { _ in alphabet[self.int(0...63)] }
        return FID(String([first] + rest))!
    }

    public mutating func token() -> RegistrationToken { RegistrationToken("tok-\(self.u64())")! }
    public mutating func timestamp() -> Timestamp { Timestamp(millisecondsSinceEpoch: Int64.random(in: -1_000_000...Int64.max, using: &self.random)) }

    public mutating func installation() -> Installation {
        Installation(
            slot: self.u32(),
            generation: self.u32(),
            fid: self.fid(),
            token: self.bool() ? self.token() : nil,
            platform: self.platform(),
            appID: AppID("1:\(self.u32()):ios:\(self.u32())")!,
            device: (try? DeviceDetails(name: self.bool() ? "Pixel" : nil, os: self.bool() ? "14" : nil, type: nil)) ?? DeviceDetails(),
            apnsToken: self.bool() ? APNsDeviceToken(String(repeating: "ab", count: 32)) : nil,
            user: self.bool() ? UserID("user-\(self.u32())") : nil,
            createdAt: self.timestamp(),
            lastSeen: self.timestamp()
        )
    }

    public mutating func delivery() -> WireDelivery {
        WireDelivery(
            id: DeliveryID(messageSequence: self.u64(), slot: self.u32()),
            fid: self.fid(),
            token: self.bool() ? self.token() : nil,
            apnsToken: self.bool() ? APNsDeviceToken(String(repeating: "ab", count: 32)) : nil,
            platform: self.platform(),
            expiry: self.timestamp(),
            isInFlight: self.bool(),
            isDeletedMessagesMarker: self.bool(),
            headers: (0..<self.int(0...3)).map { _ in DeliveryHeader(name: self.string(maximum: 16), value: self.string()) },
            payload: self.bytes()
        )
    }

    /// What a DELIVERIES frame carries: up to four groups of up to four deliveries, each group's
    /// deliveries sharing an envelope (sequence, platform, expiry, marker, headers, payload).
    public mutating func deliveryGroups() -> [WireDelivery] {
        var deliveries: [WireDelivery] = []
        for _ in 0..<self.int(0...4) {
            var envelope = self.delivery()
            envelope.isInFlight = false
            for _ in 0..<self.int(1...4) {
                var delivery = self.delivery()
                delivery.id.messageSequence = envelope.id.messageSequence
                (delivery.platform, delivery.expiry, delivery.isInFlight) = (envelope.platform, envelope.expiry, false)
                (delivery.isDeletedMessagesMarker, delivery.headers, delivery.payload) = (envelope.isDeletedMessagesMarker, envelope.headers, envelope.payload)
                deliveries.append(delivery)
            }
        }
        return deliveries
    }

    public mutating func platformReport() -> PlatformSendReport {
        var report = PlatformSendReport(platform: self.platform(), renderedBytes: self.int(0...5000), limit: self.bool() ? 4096 : nil)
        report.audience = self.int(0...1_000_000)
        report.enqueued = self.int(0...1_000_000)
        report.refused = self.int(0...10)
        report.skippedWithoutToken = self.int(0...10)
        report.skippedStale = self.int(0...10)
        report.collapsed = self.int(0...10)
        report.dropped = self.int(0...10)
        report.expired = self.int(0...10)
        return report
    }

    public mutating func itemResults() -> [BatchItemResult] {
        let codes: [FanoutError.Code] = [.invalidArgument, .notFound, .unregistered, .tooManyTopics, .internal]
        return (0..<self.int(0...6)).map { _ in self.bool() ? .ok : .failed(codes[self.int(0...(codes.count - 1))]) }
    }

    public mutating func registrationFields() -> RegistrationFields {
        RegistrationFields(
            offeredFID: self.optionalString(), token: self.optionalString(), platform: self.platform(), appID: self.string(),
            deviceName: self.optionalString(), deviceOS: self.optionalString(), deviceType: self.optionalString(), apnsToken: self.optionalString()
        )
    }

    public mutating func error() -> FanoutError {
        var error = FanoutError([.invalidArgument, .notFound, .permissionDenied][self.int(0...2)], self.string(), field: self.optionalString())
        error.violations = (0..<self.int(0...3)).map { _ in FieldViolation(field: self.string(), description: self.string()) }
        return error
    }

    public mutating func request() -> ClientRequest {
        let project = self.string()
        switch self.int(0...43) {
        case 0:
            let credential: Hello.Credential = [.apiKey(self.bytes()), .installationAuthToken(self.bytes()), .installationRefreshToken(self.bytes())][self.int(0...2)]
            return .hello(Hello(role: [.admin, .consumer, .sender, .device][self.int(0...3)], credential: credential, clientName: self.string(maximum: 10)))
        case 1: return .ping
        case 2: return .createProject(project: project)
        case 3: return .deleteProject(project: project)
        case 4: return .listProjects
        case 5:
            return .register(project: project, self.registrationFields(), issuingCredentials: self.bool())
        case 6: return .refreshToken(project: project, registration: self.string(), token: self.string())
        case 7: return .touch(project: project, registration: self.string())
        case 8: return .getInstallation(project: project, registration: self.string())
        case 9: return .deleteInstallation(project: project, fid: self.string())
        case 10: return .staleInstallations(project: project, limit: self.u32())
        case 11: return .pruneExpired(project: project)
        case 12: return .installationCount(project: project)
        case 13: return .bindDevice(project: project, registration: self.string(), user: self.string(), anonymous: self.bool())
        case 14: return .signOut(project: project, user: self.string(), registration: self.string())
        case 15: return .linkUser(project: project, anonymous: self.string(), permanent: self.string())
        case 16: return .getUser(project: project, user: self.string())
        case 17: return .cleanUpAnonymousUsers(project: project, dryRun: self.bool())
        case 18: return .subscribe(project: project, topic: self.string(), registrations: RegistrationList(self.strings()))
        case 19: return .unsubscribe(project: project, topic: self.string(), registrations: RegistrationList(self.strings()))
        case 20: return .topicsOf(project: project, registration: self.string())
        case 21: return .listTopics(project: project, startAfter: self.string(), limit: self.u32())
        case 22: return .subscriberCount(project: project, topic: self.string())
        case 23: return .send(project: project, body: self.bytes(), skipStale: self.bool())
        case 24: return .pending(project: project, registration: self.string())
        case 25: return .expireDeliveries(project: project)
        case 26: return .stats(project: project)
        case 27:
            return .attach(
                project: project, scope: self.bool() ? .platform(self.platform()) : .installations(self.strings()), credit: self.u32(), grouped: self.bool()
            )
        case 28: return .grant(credit: self.u32())
        case 29: return .acknowledge((0..<self.int(0...5)).map { _ in DeliveryID(messageSequence: self.u64(), slot: self.u32()) })
        case 30: return .snapshot
        case 31: return .audience(project: project, [AudienceTarget.topic(self.string()), .condition(self.string()), .user(self.string())][self.int(0...2)])
        case 32: return .registerBatch(project: project, (0..<self.int(0...4)).map { _ in self.registrationFields() })
        case 33: return .setAPNsToken(project: project, registration: self.string(), apnsToken: self.optionalString())
        case 34: return .installationByAPNsToken(project: project, apnsToken: self.string())
        case 35: return .listUsers(project: project, startAfter: self.string(), limit: self.u32())
        case 36: return .setAnonymousCleanUp(project: project, enabled: self.bool())
        case 37: return .issueCredentials(project: project, registration: self.string())
        case 38: return .generateAuthToken(project: project, fid: self.string())
        case 39: return .jwks
        case 40: return .rotateSigningKey
        case 41: return .setLegacyInstanceIDs(project: project, accepted: self.bool())
        case 42: return .registerBatchFIDs(project: project, (0..<self.int(0...4)).map { _ in self.registrationFields() })
        default: return .detach
        }
    }

    public mutating func message() -> ServerMessage {
        switch self.int(0...23) {
        case 0:
            return .welcome(Welcome(
                version: 1, maximumPayloadSize: self.u32(), idleTimeoutMilliseconds: self.u32(), maximumCredit: self.u32(),
                maximumInFlight: self.u32(), projects: self.strings()
            ))
        case 1: return .pong
        case 2: return .done([.createProject, .deleteProject, .attach, .attachGrouped, .grant, .detach][self.int(0...5)])
        case 3: return .names([.listProjects, .cleanUpAnonymousUsers, .topicsOf, .snapshot][self.int(0...3)], self.strings())
        case 4:
            let result = RegistrationResult(installation: self.installation(), fidWasAssigned: self.bool(), isExisting: self.bool())
            guard self.bool() else { return .registered(result) }
            let authToken = AuthToken(token: self.string(), expiresAt: self.timestamp())
            return .registeredWithCredentials(result, InstallationCredentials(fid: result.installation.fid.description, refreshToken: self.string(), authToken: authToken))
        case 5:
            let opcodes: [Opcode] = [.refreshToken, .touch, .getInstallation, .deleteInstallation, .bindDevice, .signOut, .setAPNsToken, .installationByAPNsToken]
            return .installation(opcodes[self.int(0...(opcodes.count - 1))], self.installation())
        case 6: return .staleInstallations(total: self.u64(), (0..<self.int(0...3)).map { _ in self.installation() })
        case 7: return .count([.pruneExpired, .installationCount, .subscriberCount, .audience, .expireDeliveries, .acknowledge][self.int(0...5)], self.u64())
        case 8:
            return .user(self.bool() ? .linkUser : .getUser, User(
                id: UserID("u-\(self.u32())")!, isAnonymous: self.bool(), devices: (0..<self.int(0...3)).map { _ in self.installation() }, lastActive: self.timestamp(),
                createdAt: self.timestamp()
            ))
        case 9: return .itemResults(self.bool() ? .subscribe : .unsubscribe, self.itemResults())
        case 10: return .topics((0..<self.int(0...4)).map { _ in TopicCount(topic: self.string(), subscribers: self.u64()) })
        case 11:
            return .sent(SendReceipt(
                messageID: self.string(), sequence: self.u64(), audience: self.u32(), enqueued: self.u32(),
                recipients: (0..<self.int(0...3)).map { _ in self.bool() ? .ok : .failed(self.error()) },
                platforms: (0..<self.int(0...3)).map { _ in self.platformReport() }
            ))
        case 12: return .pending((0..<self.int(0...3)).map { _ in self.delivery() })
        case 13:
            var deliveries = DeliveryStatistics()
            deliveries.sends = self.int(0...1_000_000)
            deliveries.pending = self.int(0...1_000_000)
            deliveries.consumers = self.int(0...10)
            var log = WALStatistics()
            log.syncs = self.int(0...1_000_000)
            log.bytes = self.int(0...1_000_000_000)
            return .stats(ProjectStatistics(installations: self.u64() >> 1, deliveries: deliveries, log: log))
        case 14: return .delivery(self.delivery())
        case 15: return .goAway([.unavailable, .internal][self.int(0...1)], self.string())
        case 16:
            return .registeredBatch((0..<self.int(0...4)).map { _ in
                self.bool()
                    ? .registered(RegistrationResult(installation: self.installation(), fidWasAssigned: self.bool(), isExisting: self.bool()))
                    : .failed(self.error())
            })
        case 17:
            return .users((0..<self.int(0...3)).map { _ in
                UserSummary(id: "u-\(self.u32())", isAnonymous: self.bool(), createdAt: self.timestamp(), lastActive: self.timestamp(), devices: self.int(0...9))
            })
        case 18: return .anonymousCleanUp(self.bool() ? self.timestamp() : nil)
        case 19:
            return .credentials(InstallationCredentials(fid: self.string(), refreshToken: self.string(), authToken: AuthToken(token: self.string(), expiresAt: self.timestamp())))
        case 20: return .authToken(AuthToken(token: self.string(), expiresAt: self.timestamp()))
        case 21: return .deliveries(self.deliveryGroups())
        case 22:
            return .registeredFIDs((0..<self.int(0...4)).map { _ in
                self.bool()
                    ? .registered(fid: self.fid(), fidWasAssigned: self.bool(), isExisting: self.bool())
                    : .failed(self.error())
            })
        default:
            return .error(self.error())
        }
    }
}
