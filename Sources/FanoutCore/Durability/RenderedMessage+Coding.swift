/// A rendered message in the log and in snapshots (docs/wal-format.md, "Rendered message"): what
/// routing and delivery read, stored as it was accepted, so that replay never runs the message
/// parser (a rule a newer build adds cannot refuse an old log).
///
/// ```
/// i64 accepted-at | target | options | u32 n | APNs body | u32 n | Android payload | u32 n | web push payload
/// ```
extension BinaryWriter {
    mutating func write(_ message: RenderedMessage) {
        self.write(message.acceptedAt)
        self.write(message.target)
        self.write(message.options)
        for payload in [message.apnsBody, message.androidPayload, message.webpushPayload] {
            self.write(UInt32(payload.count))
            self.append(payload)
        }
    }

    /// `u8 kind | value`: 1 token, 2 FID, 3 topic, 4 condition, 5 user, 6 multicast
    /// (`u32 count | (u8 1 | token or u8 2 | FID)*`).
    private mutating func write(_ target: Message.Target) {
        switch target {
        case .token(let token):
            self.write(RegistrationAddress.token(token))
        case .fid(let fid):
            self.write(RegistrationAddress.fid(fid))
        case .topic(let topic):
            self.write(RenderedMessageCoding.TargetKind.topic.rawValue)
            self.write(topic.value)
        case .condition(let condition):
            self.write(RenderedMessageCoding.TargetKind.condition.rawValue)
            self.write(condition)
        case .user(let user):
            self.write(RenderedMessageCoding.TargetKind.user.rawValue)
            self.write(user.value)
        case .multicast(let addresses):
            self.write(RenderedMessageCoding.TargetKind.multicast.rawValue)
            self.write(UInt32(addresses.count))
            for address in addresses { self.write(address) }
        }
    }

    /// `u8 1 | token` or `u8 2 | FID`: a token or FID target, and each address of a multicast.
    private mutating func write(_ address: RegistrationAddress) {
        switch address {
        case .token(let token):
            self.write(RenderedMessageCoding.TargetKind.token.rawValue)
            self.write(token)
        case .fid(let fid):
            self.write(RenderedMessageCoding.TargetKind.fid.rawValue)
            self.write(fid)
        }
    }

    /// Prefix order: `u8 1 | topic`, `u8 2 | operand`, `u8 3 | lhs | rhs` (and), `u8 4 | lhs | rhs` (or).
    private mutating func write(_ condition: Condition) {
        switch condition {
        case .topic(let topic):
            self.write(UInt8(1))
            self.write(topic.value)
        case .not(let operand):
            self.write(UInt8(2))
            self.write(operand)
        case .and(let lhs, let rhs), .or(let lhs, let rhs):
            if case .and = condition { self.write(UInt8(3)) } else { self.write(UInt8(4)) }
            self.write(lhs)
            self.write(rhs)
        }
    }

    /// `u16 fields given | the given values in field order` (`RenderedMessageCoding.OptionField`).
    private mutating func write(_ options: Message.DeliveryOptions) {
        typealias Field = RenderedMessageCoding.OptionField
        var given: Field = []
        if options.androidPriority != nil { given.insert(.androidPriority) }
        if options.androidTTLSeconds != nil { given.insert(.androidTTL) }
        if options.androidCollapseKey != nil { given.insert(.androidCollapseKey) }
        if options.apnsPriority != nil { given.insert(.apnsPriority) }
        if options.apnsPushType != nil { given.insert(.apnsPushType) }
        if options.apnsExpiration != nil { given.insert(.apnsExpiration) }
        if options.apnsCollapseID != nil { given.insert(.apnsCollapseID) }
        if options.webpushTTLSeconds != nil { given.insert(.webpushTTL) }
        if options.webpushTopic != nil { given.insert(.webpushTopic) }
        if options.apnsTopic != nil { given.insert(.apnsTopic) }
        if options.apnsIsBackground { given.insert(.apnsIsBackground) }
        if options.webpushUrgency != nil { given.insert(.webpushUrgency) }
        if options.skipLastSeenBefore != nil { given.insert(.skipLastSeenBefore) }
        self.write(given.rawValue)
        if let priority = options.androidPriority { self.write(UInt8(priority == .high ? 1 : 0)) }
        if let ttl = options.androidTTLSeconds { self.write(ttl) }
        if let key = options.androidCollapseKey { self.write(key) }
        if let priority = options.apnsPriority { self.write(Int64(priority)) }
        if let pushType = options.apnsPushType { self.write(pushType) }
        if let expiration = options.apnsExpiration { self.write(expiration) }
        if let collapseID = options.apnsCollapseID { self.write(collapseID) }
        if let ttl = options.webpushTTLSeconds { self.write(ttl) }
        if let topic = options.webpushTopic { self.write(topic) }
        if let topic = options.apnsTopic { self.write(topic) }
        if let urgency = options.webpushUrgency { self.write(urgency) }
        if let cutoff = options.skipLastSeenBefore { self.write(cutoff) }
    }
}

extension BinaryReader {
    /// Reads what `BinaryWriter.write(_: RenderedMessage)` wrote. Names, tokens and FIDs are
    /// checked as the model types require; the message rules of the validator are not applied again.
    mutating func readRenderedMessage() throws(Error) -> RenderedMessage {
        let acceptedAt = try self.readTimestamp()
        let target = try self.readTarget()
        let options = try self.readDeliveryOptions()
        var payloads: [[UInt8]] = []
        for _ in 0..<3 {
            let length = Int(try self.read(UInt32.self))
            guard length <= RenderedMessageCoding.maximumPayloadBytes, length <= self.remaining else {
                throw Error(offset: self.position - 4, reason: "a payload length the record cannot hold")
            }
            payloads.append(Array(try self.readBytes(length)))
        }
        return RenderedMessage(
            target: target,
            options: options,
            acceptedAt: acceptedAt,
            apnsBody: payloads[0],
            androidPayload: payloads[1],
            webpushPayload: payloads[2]
        )
    }

    private mutating func readTarget() throws(Error) -> Message.Target {
        let kindOffset = self.position
        switch RenderedMessageCoding.TargetKind(rawValue: try self.read(UInt8.self)) {
        case .token: return .token(try self.readToken())
        case .fid: return .fid(try self.readFID())
        case .topic: return .topic(try self.readTopic())
        case .condition: return .condition(try self.readCondition(depth: 0))
        case .user: return .user(try self.readUser())
        case .multicast:
            let count = Int(try self.read(UInt32.self))
            // Each address takes at least 5 bytes: refused before anything is allocated.
            guard count * 5 <= self.remaining else { throw Error(offset: self.position - 4, reason: "an address count the record cannot hold") }
            var addresses: [RegistrationAddress] = []
            addresses.reserveCapacity(count)
            for _ in 0..<count {
                let offset = self.position
                switch RenderedMessageCoding.TargetKind(rawValue: try self.read(UInt8.self)) {
                case .token: addresses.append(.token(try self.readToken()))
                case .fid: addresses.append(.fid(try self.readFID()))
                default: throw Error(offset: offset, reason: "unknown address kind")
                }
            }
            return .multicast(addresses)
        case nil:
            throw Error(offset: kindOffset, reason: "unknown target kind")
        }
    }

    private mutating func readCondition(depth: Int) throws(Error) -> Condition {
        let offset = self.position
        // A bound on nesting against a damaged or hostile file (far above what the parser accepts).
        guard depth < RenderedMessageCoding.maximumConditionDepth else { throw Error(offset: offset, reason: "a condition nested too deeply") }
        switch try self.read(UInt8.self) {
        case 1: return .topic(try self.readTopic())
        case 2: return .not(try self.readCondition(depth: depth + 1))
        case 3: return .and(try self.readCondition(depth: depth + 1), try self.readCondition(depth: depth + 1))
        case 4: return .or(try self.readCondition(depth: depth + 1), try self.readCondition(depth: depth + 1))
        default: throw Error(offset: offset, reason: "unknown condition node")
        }
    }

    private mutating func readDeliveryOptions() throws(Error) -> Message.DeliveryOptions {
        typealias Field = RenderedMessageCoding.OptionField
        let offset = self.position
        let given = Field(rawValue: try self.read(UInt16.self))
        guard Field.known.isSuperset(of: given) else {
            throw Error(offset: offset, reason: "delivery options this build does not know (written by a newer one)")
        }
        var options = Message.DeliveryOptions()
        if given.contains(.androidPriority) {
            switch try self.read(UInt8.self) {
            case 0: options.androidPriority = .normal
            case 1: options.androidPriority = .high
            default: throw Error(offset: self.position - 1, reason: "unknown Android priority")
            }
        }
        if given.contains(.androidTTL) { options.androidTTLSeconds = try self.read(Int64.self) }
        if given.contains(.androidCollapseKey) { options.androidCollapseKey = try self.readString(limit: RenderedMessageCoding.maximumOptionBytes) }
        if given.contains(.apnsPriority) { options.apnsPriority = Int(try self.read(Int64.self)) }
        if given.contains(.apnsPushType) { options.apnsPushType = try self.readString(limit: RenderedMessageCoding.maximumOptionBytes) }
        if given.contains(.apnsExpiration) { options.apnsExpiration = try self.read(UInt64.self) }
        if given.contains(.apnsCollapseID) { options.apnsCollapseID = try self.readString(limit: RenderedMessageCoding.maximumOptionBytes) }
        if given.contains(.webpushTTL) { options.webpushTTLSeconds = try self.read(UInt32.self) }
        if given.contains(.webpushTopic) { options.webpushTopic = try self.readString(limit: RenderedMessageCoding.maximumOptionBytes) }
        if given.contains(.apnsTopic) { options.apnsTopic = try self.readString(limit: RenderedMessageCoding.maximumOptionBytes) }
        options.apnsIsBackground = given.contains(.apnsIsBackground)
        if given.contains(.webpushUrgency) { options.webpushUrgency = try self.readString(limit: RenderedMessageCoding.maximumOptionBytes) }
        if given.contains(.skipLastSeenBefore) { options.skipLastSeenBefore = try self.readTimestamp() }
        return options
    }
}

/// The constants of the rendered message's encoding.
enum RenderedMessageCoding {
    /// A rendered payload is derived from a request of at most a few hundred KiB; this bounds a
    /// damaged length long before it could allocate much.
    static let maximumPayloadBytes = 16 << 20
    static let maximumOptionBytes = 4096
    static let maximumConditionDepth = 256

    /// The target's kind byte. Never renumber.
    enum TargetKind: UInt8 {
        case token = 1
        case fid = 2
        case topic = 3
        case condition = 4
        case user = 5
        case multicast = 6
    }

    /// Which delivery options a record holds, one bit each, values in this order. Never renumber;
    /// a new option takes the next bit, and builds that do not know it refuse the record.
    struct OptionField: OptionSet {
        let rawValue: UInt16
        static let androidPriority = OptionField(rawValue: 1 << 0)
        static let androidTTL = OptionField(rawValue: 1 << 1)
        static let androidCollapseKey = OptionField(rawValue: 1 << 2)
        static let apnsPriority = OptionField(rawValue: 1 << 3)
        static let apnsPushType = OptionField(rawValue: 1 << 4)
        static let apnsExpiration = OptionField(rawValue: 1 << 5)
        static let apnsCollapseID = OptionField(rawValue: 1 << 6)
        static let webpushTTL = OptionField(rawValue: 1 << 7)
        static let webpushTopic = OptionField(rawValue: 1 << 8)
        static let apnsTopic = OptionField(rawValue: 1 << 9)
        /// A flag with no value.
        static let apnsIsBackground = OptionField(rawValue: 1 << 10)
        static let webpushUrgency = OptionField(rawValue: 1 << 11)
        static let skipLastSeenBefore = OptionField(rawValue: 1 << 12)
        static let known = OptionField(rawValue: (1 << 13) - 1)
    }
}

extension RenderedMessage {
    /// The bytes of the three payloads (for `fanout wal inspect`).
    var renderedByteCount: Int { self.apnsBody.count + self.androidPayload.count + self.webpushPayload.count }
}
