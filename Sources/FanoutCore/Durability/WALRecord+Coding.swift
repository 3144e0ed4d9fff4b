extension WALRecord {
    /// The most elements of one counted list in a record (a batch is at most 1000; room to spare).
    static let maximumFIDsPerRecord = 1 << 24

    /// Writes a registration's fields between its FID and its time, as a `register` record holds
    /// them (docs/wal-format.md).
    static func writeRegistrationFields(
        token: RegistrationToken?,
        platform: Platform,
        appID: AppID,
        device: DeviceDetails,
        apnsToken: APNsDeviceToken?,
        into writer: inout BinaryWriter
    ) {
        writer.write(token)
        writer.write(platform.code)
        writer.write(appID)
        writer.write(device.name)
        writer.write(device.os)
        writer.write(device.type)
        writer.write(apnsToken?.hex)
    }

    /// A `registerEncoded` record as the log reads it back: `register`.
    /// - Throws: `INTERNAL` when its fields do not decode (they were encoded by this build).
    var decodedRegistration: WALRecord {
        get throws(FanoutError) {
            var reader = BinaryReader(WALFormat.encode(self))
            do {
                return try Self.decode(from: &reader)
            } catch {
                throw FanoutError(.internal, "an encoded registration does not decode: \(error)")
            }
        }
    }

    /// Appends `u8 type | body` (docs/wal-format.md).
    func encode(into writer: inout BinaryWriter) {
        switch self {
        case .createProject(let project):
            writer.write(Kind.createProject.rawValue)
            writer.write(project.value)
        case .deleteProject(let project):
            writer.write(Kind.deleteProject.rawValue)
            writer.write(project.value)
        case .register(let project, let r):
            writer.write(Kind.register.rawValue)
            writer.write(project.value)
            writer.write(r.fid)
            Self.writeRegistrationFields(token: r.token, platform: r.platform, appID: r.appID, device: r.device, apnsToken: r.apnsToken, into: &writer)
            writer.write(r.at)
        case .registerEncoded(let project, let r):
            writer.write(Kind.register.rawValue)
            writer.write(project.value)
            writer.write(r.fid)
            r.batchFields.withUnsafeBytes { writer.append(UnsafeRawBufferPointer(rebasing: $0[r.range])) }
            writer.write(r.at)
        case .refreshToken(let project, let fid, let token, let at):
            writer.write(Kind.refreshToken.rawValue)
            writer.write(project.value)
            writer.write(fid)
            writer.write(token)
            writer.write(at)
        case .touch(let project, let fid, let at):
            writer.write(Kind.touch.rawValue)
            writer.write(project.value)
            writer.write(fid)
            writer.write(at)
        case .setAPNsToken(let project, let fid, let token):
            writer.write(Kind.setAPNsToken.rawValue)
            writer.write(project.value)
            writer.write(fid)
            writer.write(token?.hex)
        case .setLegacyInstanceIDs(let project, let accepted):
            writer.write(Kind.setLegacyInstanceIDs.rawValue)
            writer.write(project.value)
            writer.write(accepted)
        case .setCredential(let project, let fid, let digest):
            writer.write(Kind.setCredential.rawValue)
            writer.write(project.value)
            writer.write(fid)
            for byte in digest { writer.write(byte) }
        case .deleteInstallation(let project, let fid):
            writer.write(Kind.deleteInstallation.rawValue)
            writer.write(project.value)
            writer.write(fid)
        case .bindDevice(let project, let fid, let user, let anonymous, let at):
            writer.write(Kind.bindDevice.rawValue)
            writer.write(project.value)
            writer.write(fid)
            writer.write(user.value)
            writer.write(anonymous)
            writer.write(at)
        case .signOut(let project, let user, let fid):
            writer.write(Kind.signOut.rawValue)
            writer.write(project.value)
            writer.write(user.value)
            writer.write(fid)
        case .linkUser(let project, let anonymous, let permanent, let at):
            writer.write(Kind.linkUser.rawValue)
            writer.write(project.value)
            writer.write(anonymous.value)
            writer.write(permanent.value)
            writer.write(at)
        case .cleanUpAnonymousUsers(let project, let at):
            writer.write(Kind.cleanUpAnonymousUsers.rawValue)
            writer.write(project.value)
            writer.write(at)
        case .pruneExpiredInstallations(let project, let at):
            writer.write(Kind.pruneExpiredInstallations.rawValue)
            writer.write(project.value)
            writer.write(at)
        case .subscribe(let project, let topic, let installations):
            Self.writeSubscriptionHead(.subscribe, project, topic, count: installations.count, into: &writer)
            writer.write(installations)
        case .unsubscribe(let project, let topic, let installations):
            Self.writeSubscriptionHead(.unsubscribe, project, topic, count: installations.count, into: &writer)
            writer.write(installations)
        case .subscribeFIDs(let project, let topic, let fids):
            // Written only by tests: what older builds logged.
            Self.writeSubscriptionHead(.subscribeFIDs, project, topic, count: fids.count, into: &writer)
            for fid in fids { writer.write(fid) }
        case .unsubscribeFIDs(let project, let topic, let fids):
            Self.writeSubscriptionHead(.unsubscribeFIDs, project, topic, count: fids.count, into: &writer)
            for fid in fids { writer.write(fid) }
        case .restoreUser(let project, let user, let anonymous, let lastActive):
            writer.write(Kind.restoreUser.rawValue)
            writer.write(project.value)
            writer.write(user.value)
            writer.write(anonymous)
            writer.write(lastActive)
        case .restoreUserCreated(let project, let user, let anonymous, let createdAt, let lastActive):
            writer.write(Kind.restoreUserCreated.rawValue)
            writer.write(project.value)
            writer.write(user.value)
            writer.write(anonymous)
            writer.write(createdAt)
            writer.write(lastActive)
        case .removeAnonymousUsers(let project, let users):
            writer.write(Kind.removeAnonymousUsers.rawValue)
            writer.write(project.value)
            writer.write(UInt32(users.count))
            for user in users { writer.write(user.value) }
        case .pruneLastSeenBefore(let project, let cutoff):
            writer.write(Kind.pruneLastSeenBefore.rawValue)
            writer.write(project.value)
            writer.write(cutoff)
        case .setAnonymousCleanup(let project, let enabledAt):
            writer.write(Kind.setAnonymousCleanup.rawValue)
            writer.write(project.value)
            writer.write(enabledAt != nil)
            if let enabledAt { writer.write(enabledAt) }
        case .retireFIDs(let project, let fids):
            writer.write(Kind.retireFIDs.rawValue)
            writer.write(project.value)
            writer.write(UInt32(fids.count))
            for fid in fids { writer.write(fid) }
        case .retireTokenHashes(let project, let hashes):
            writer.write(Kind.retireTokenHashes.rawValue)
            writer.write(project.value)
            writer.write(UInt32(hashes.count))
            for hash in hashes { writer.write(hash) }
        case .restoreSubscribers(let project, let topic, let ordinals):
            writer.write(Kind.restoreSubscribers.rawValue)
            writer.write(project.value)
            writer.write(topic.value)
            writer.writeCounted(ordinals)
        case .restoreSlotLayout(let project, let capacity, let freeSlots):
            writer.write(Kind.restoreSlotLayout.rawValue)
            writer.write(project.value)
            writer.write(capacity)
            writer.writeCounted(freeSlots)
        case .send(let project, let sequence, let message):
            writer.write(Kind.send.rawValue)
            writer.write(project.value)
            writer.write(sequence)
            writer.write(message)
        case .sendBody(let project, let sequence, let at, let body):
            writer.write(Kind.sendBody.rawValue)
            writer.write(project.value)
            writer.write(sequence)
            writer.write(at)
            writer.write(UInt32(body.count))
            writer.append(body)
        case .acknowledge(let project, let deliveries):
            // Runs of one message's deliveries share its sequence: u32 runs | (u64 sequence | u32 n | n x u32 slot)*
            writer.write(Kind.acknowledge.rawValue)
            writer.write(project.value)
            var runs: [(sequence: UInt64, slots: [UInt32])] = []
            for delivery in deliveries {
                if runs.last?.sequence == delivery.messageSequence {
                    runs[runs.count - 1].slots.append(delivery.slot)
                } else {
                    runs.append((delivery.messageSequence, [delivery.slot]))
                }
            }
            writer.write(UInt32(runs.count))
            for run in runs {
                writer.write(run.sequence)
                writer.writeCounted(run.slots)
            }
        case .expireDeliveries(let project, let at):
            writer.write(Kind.expireDeliveries.rawValue)
            writer.write(project.value)
            writer.write(at)
        case .restoreMessage(let project, let sequence, let message, let slots, let markerSlots):
            writer.write(Kind.restoreMessage.rawValue)
            writer.write(project.value)
            writer.write(sequence)
            writer.write(message)
            writer.writeCounted(slots)
            writer.writeCounted(markerSlots)
        case .restoreMessageBody(let project, let sequence, let at, let body, let slots, let markerSlots):
            writer.write(Kind.restoreMessageBody.rawValue)
            writer.write(project.value)
            writer.write(sequence)
            writer.write(at)
            writer.write(UInt32(body.count))
            writer.append(body)
            writer.writeCounted(slots)
            writer.writeCounted(markerSlots)
        case .restoreMessageSequence(let project, let next):
            writer.write(Kind.restoreMessageSequence.rawValue)
            writer.write(project.value)
            writer.write(next)
        }
    }

    /// Decodes one record that must use every byte of `reader` up to its end. Every value is
    /// validated as the engine's own types require.
    static func decode(from reader: inout BinaryReader) throws(BinaryReader.Error) -> WALRecord {
        let typeOffset = reader.position
        guard let kind = Kind(rawValue: try reader.read(UInt8.self)) else {
            throw BinaryReader.Error(offset: typeOffset, reason: "unknown record type")
        }
        let project = try reader.validated(ProjectID(try reader.readString(limit: 64)), "project id")
        let record: WALRecord
        switch kind {
        case .createProject:
            record = .createProject(project)
        case .deleteProject:
            record = .deleteProject(project)
        case .register:
            let fid = try reader.readFID()
            let token = try reader.readOptionalString(limit: RegistrationToken.maximumLength)
                .map { (value: String) throws(BinaryReader.Error) in try reader.validated(RegistrationToken(value), "token") }
            let platform = try Self.platform(try reader.read(UInt8.self), reader)
            let appID = try reader.validated(AppID(try reader.readString(limit: AppID.maximumLength)), "appId")
            let name = try reader.readOptionalString(limit: DeviceDetails.maximumFieldLength)
            let os = try reader.readOptionalString(limit: DeviceDetails.maximumFieldLength)
            let type = try reader.readOptionalString(limit: DeviceDetails.maximumFieldLength)
            let device: DeviceDetails
            do {
                device = try DeviceDetails(name: name, os: os, type: type)
            } catch {
                throw BinaryReader.Error(offset: reader.position, reason: "invalid device details")
            }
            let apns = try reader.readOptionalAPNsToken()
            let at = try reader.readTimestamp()
            record = .register(
                project,
                RegisteredInstallation(fid: fid, token: token, platform: platform, appID: appID, device: device, apnsToken: apns, at: at)
            )
        case .refreshToken:
            let fid = try reader.readFID()
            let token = try reader.readToken()
            record = .refreshToken(project, fid: fid, token: token, at: try reader.readTimestamp())
        case .touch:
            let fid = try reader.readFID()
            record = .touch(project, fid: fid, at: try reader.readTimestamp())
        case .setAPNsToken:
            let fid = try reader.readFID()
            record = .setAPNsToken(project, fid: fid, token: try reader.readOptionalAPNsToken())
        case .setLegacyInstanceIDs:
            record = .setLegacyInstanceIDs(project, accepted: try reader.readBool())
        case .setCredential:
            let fid = try reader.readFID()
            record = .setCredential(project, fid: fid, digest: Array(try reader.readBytes(32)))
        case .deleteInstallation:
            record = .deleteInstallation(project, fid: try reader.readFID())
        case .bindDevice:
            let fid = try reader.readFID()
            let user = try reader.readUser()
            let anonymous = try reader.readBool()
            record = .bindDevice(project, fid: fid, user: user, anonymous: anonymous, at: try reader.readTimestamp())
        case .signOut:
            let user = try reader.readUser()
            record = .signOut(project, user: user, fid: try reader.readFID())
        case .linkUser:
            let anonymous = try reader.readUser()
            let permanent = try reader.readUser()
            record = .linkUser(project, anonymous: anonymous, permanent: permanent, at: try reader.readTimestamp())
        case .cleanUpAnonymousUsers:
            record = .cleanUpAnonymousUsers(project, at: try reader.readTimestamp())
        case .pruneExpiredInstallations:
            record = .pruneExpiredInstallations(project, at: try reader.readTimestamp())
        case .subscribe, .unsubscribe:
            let topic = try reader.readTopic()
            let installations = try Self.readSlotReferences(&reader)
            record = kind == .subscribe
                ? .subscribe(project, topic: topic, installations: installations)
                : .unsubscribe(project, topic: topic, installations: installations)
        case .subscribeFIDs, .unsubscribeFIDs:
            let topic = try reader.readTopic()
            let fids = try Self.readFIDs(&reader)
            record = kind == .subscribeFIDs ? .subscribeFIDs(project, topic: topic, fids: fids) : .unsubscribeFIDs(project, topic: topic, fids: fids)
        case .restoreUser:
            let user = try reader.readUser()
            let anonymous = try reader.readBool()
            record = .restoreUser(project, user: user, anonymous: anonymous, lastActive: try reader.readTimestamp())
        case .restoreUserCreated:
            let user = try reader.readUser()
            let anonymous = try reader.readBool()
            let createdAt = try reader.readTimestamp()
            record = .restoreUserCreated(project, user: user, anonymous: anonymous, createdAt: createdAt, lastActive: try reader.readTimestamp())
        case .removeAnonymousUsers:
            // A user id takes at least 5 bytes (a u32 length and one byte).
            record = .removeAnonymousUsers(project, users: try Self.readCounted(&reader, elementSize: 5, "user") { (reader: inout BinaryReader) throws(BinaryReader.Error) in
                try reader.readUser()
            })
        case .pruneLastSeenBefore:
            record = .pruneLastSeenBefore(project, cutoff: try reader.readTimestamp())
        case .setAnonymousCleanup:
            record = .setAnonymousCleanup(project, enabledAt: try reader.readBool() ? try reader.readTimestamp() : nil)
        case .retireFIDs:
            record = .retireFIDs(project, fids: try Self.readFIDs(&reader))
        case .retireTokenHashes:
            let hashes = try Self.readCounted(&reader, elementSize: 8, "hash") { (reader: inout BinaryReader) throws(BinaryReader.Error) in
                try reader.read(UInt64.self)
            }
            record = .retireTokenHashes(project, hashes: hashes)
        case .restoreSubscribers:
            let topic = try reader.readTopic()
            record = .restoreSubscribers(project, topic: topic, ordinals: try Self.readAscendingSlots(&reader))
        case .restoreSlotLayout:
            let capacity = try reader.read(UInt32.self)
            record = .restoreSlotLayout(project, capacity: capacity, freeSlots: try reader.readCountedUInt32s())
        case .send:
            let sequence = try reader.read(UInt64.self)
            record = .send(project, sequence: sequence, message: try reader.readRenderedMessage())
        case .sendBody:
            let sequence = try reader.read(UInt64.self)
            let at = try reader.readTimestamp()
            record = .sendBody(project, sequence: sequence, at: at, body: try Self.readBody(&reader))
        case .acknowledge:
            let runs = Int(try reader.read(UInt32.self))
            guard runs * 12 <= reader.remaining else {
                throw BinaryReader.Error(offset: reader.position - 4, reason: "a run count the record cannot hold")
            }
            var deliveries: [DeliveryID] = []
            for _ in 0..<runs {
                let sequence = try reader.read(UInt64.self)
                for slot in try reader.readCountedUInt32s() {
                    deliveries.append(DeliveryID(messageSequence: sequence, slot: slot))
                }
            }
            record = .acknowledge(project, deliveries: deliveries)
        case .expireDeliveries:
            record = .expireDeliveries(project, at: try reader.readTimestamp())
        case .restoreMessage:
            let sequence = try reader.read(UInt64.self)
            let message = try reader.readRenderedMessage()
            let slots = try Self.readAscendingSlots(&reader)
            let markerSlots = try Self.readAscendingSlots(&reader)
            record = .restoreMessage(project, sequence: sequence, message: message, slots: slots, markerSlots: markerSlots)
        case .restoreMessageBody:
            let sequence = try reader.read(UInt64.self)
            let at = try reader.readTimestamp()
            let body = try Self.readBody(&reader)
            let slots = try Self.readAscendingSlots(&reader)
            let markerSlots = try Self.readAscendingSlots(&reader)
            record = .restoreMessageBody(project, sequence: sequence, at: at, body: body, slots: slots, markerSlots: markerSlots)
        case .restoreMessageSequence:
            record = .restoreMessageSequence(project, next: try reader.read(UInt64.self))
        }
        guard reader.remaining == 0 else {
            throw BinaryReader.Error(offset: reader.position, reason: "trailing bytes after the record")
        }
        return record
    }

    /// `u8 type | project | topic | u32 count`: what every subscription record has before its
    /// `count` elements.
    private static func writeSubscriptionHead(_ kind: Kind, _ project: ProjectID, _ topic: TopicName, count: Int, into writer: inout BinaryWriter) {
        writer.write(kind.rawValue)
        writer.write(project.value)
        writer.write(topic.value)
        writer.write(UInt32(count))
    }

    /// `u32 count | count x element` (each `elementSize` bytes); a count the remaining bytes cannot
    /// hold is refused before anything is allocated.
    private static func readCounted<Element>(
        _ reader: inout BinaryReader,
        elementSize: Int,
        _ what: String,
        _ element: (inout BinaryReader) throws(BinaryReader.Error) -> Element
    ) throws(BinaryReader.Error) -> [Element] {
        let count = Int(try reader.read(UInt32.self))
        guard count <= Self.maximumFIDsPerRecord, count * elementSize <= reader.remaining else {
            throw BinaryReader.Error(offset: reader.position - 4, reason: "a \(what) count the record cannot hold")
        }
        var elements: [Element] = []
        elements.reserveCapacity(count)
        for _ in 0..<count { elements.append(try element(&reader)) }
        return elements
    }

    /// `u32 count | count x FID` (18 bytes each).
    private static func readFIDs(_ reader: inout BinaryReader) throws(BinaryReader.Error) -> [FID] {
        try Self.readCounted(&reader, elementSize: 18, "FID") { (reader: inout BinaryReader) throws(BinaryReader.Error) in try reader.readFID() }
    }

    /// `u32 count | count x (u32 slot, u16 check)`.
    private static func readSlotReferences(_ reader: inout BinaryReader) throws(BinaryReader.Error) -> [SlotReference] {
        try Self.readCounted(&reader, elementSize: SlotReference.encodedSize, "slot") { (reader: inout BinaryReader) throws(BinaryReader.Error) in
            SlotReference(slot: try reader.read(UInt32.self), check: try reader.read(UInt16.self))
        }
    }

    /// `u32 count | count x u32`, strictly ascending.
    private static func readAscendingSlots(_ reader: inout BinaryReader) throws(BinaryReader.Error) -> [UInt32] {
        let slots = try reader.readCountedUInt32s()
        guard zip(slots, slots.dropFirst()).allSatisfy({ $0 < $1 }) else {
            throw BinaryReader.Error(offset: reader.position, reason: "slots are not strictly ascending")
        }
        return slots
    }

    /// `u32 length | bytes`: a send body, at most what the message parser accepts.
    private static func readBody(_ reader: inout BinaryReader) throws(BinaryReader.Error) -> [UInt8] {
        let length = Int(try reader.read(UInt32.self))
        guard length <= JSONParser.Limits().maximumBytes, length <= reader.remaining else {
            throw BinaryReader.Error(offset: reader.position - 4, reason: "a message body length the record cannot hold")
        }
        return Array(try reader.readBytes(length))
    }


    private static func platform(_ code: UInt8, _ reader: BinaryReader) throws(BinaryReader.Error) -> Platform {
        guard let platform = Platform(code: code) else {
            throw BinaryReader.Error(offset: reader.position - 1, reason: "unknown platform")
        }
        return platform
    }
}

extension BinaryReader {
    /// `value`, or damage at the current position naming `what` when the model type refused it.
    func validated<T>(_ value: T?, _ what: String) throws(Error) -> T {
        guard let value else { throw Error(offset: self.position, reason: "invalid \(what)") }
        return value
    }

    mutating func readToken() throws(Error) -> RegistrationToken {
        try self.validated(RegistrationToken(try self.readString(limit: RegistrationToken.maximumLength)), "token")
    }

    mutating func readTopic() throws(Error) -> TopicName {
        try self.validated(TopicName(try self.readString(limit: TopicName.maximumLength)), "topic")
    }

    mutating func readUser() throws(Error) -> UserID {
        try self.validated(UserID(try self.readString(limit: UserID.maximumLength)), "user")
    }

    /// An optional APNs token in lowercase hex, as written: a log holds each value in one spelling only.
    mutating func readOptionalAPNsToken() throws(Error) -> APNsDeviceToken? {
        try self.readOptionalString(limit: 200).map { (value: String) throws(Error) in
            try self.validated(APNsDeviceToken(value).flatMap { $0.hex == value ? $0 : nil }, "APNs token")
        }
    }
}
