internal import FanoutModel
internal import NIOCore

// The structures several messages share (docs/wire-protocol.md section 3).

extension ByteBuffer {
    mutating func writeWireInstallation(_ i: Installation) throws(ProtocolError) {
        self.writeMultipleIntegers(i.slot, i.generation)
        self.writeWireFID(i.fid)
        self.writeWireOptionalToken(i.token)
        self.writeInteger(i.platform.code)
        try self.writeWireString(i.appID.value, field: "appId")
        try self.writeWireOptionalString(i.device.name, field: "deviceName")
        try self.writeWireOptionalString(i.device.os, field: "deviceOs")
        try self.writeWireOptionalString(i.device.type, field: "deviceType")
        try self.writeWireOptionalString(i.apnsToken?.hex, field: "apnsToken")
        try self.writeWireOptionalString(i.user?.value, field: "user")
        self.writeWireTimestamp(i.createdAt)
        self.writeWireTimestamp(i.lastSeen)
    }

    mutating func writeWireDelivery(_ d: WireDelivery) throws(ProtocolError) {
        try self.writeWireDelivery(
            id: d.id, fid: d.fid, token: d.token?.value, apnsToken: d.apnsToken?.hex, platform: d.platform, expiry: d.expiry,
            isInFlight: d.isInFlight, isDeletedMessagesMarker: d.isDeletedMessagesMarker, headers: d.headers, payload: d.payload
        )
    }

    /// `delivery` from its fields.
    mutating func writeWireDelivery(
        id: DeliveryID, fid: FID, token: String?, apnsToken: String?, platform: Platform, expiry: Timestamp,
        isInFlight: Bool, isDeletedMessagesMarker: Bool, headers: [DeliveryHeader], payload: [UInt8]
    ) throws(ProtocolError) {
        self.writeMultipleIntegers(id.messageSequence, id.slot)
        self.writeWireFID(fid)
        try self.writeWireOptionalString(token, field: "token")
        try self.writeWireOptionalString(apnsToken, field: "apnsToken")
        self.writeInteger(platform.code)
        self.writeWireTimestamp(expiry)
        self.writeWireBool(isInFlight)
        self.writeWireBool(isDeletedMessagesMarker)
        try self.writeWireCount(headers.count, field: "headers")
        for header in headers {
            try self.writeWireString(header.name, field: "headers")
            try self.writeWireString(header.value, field: "headers")
        }
        try self.writeWireBytes(payload, field: "payload")
    }

    /// DELIVERIES' payload: runs of consecutive deliveries with equal envelopes (and equal headers
    /// and payloads) as groups. `writeDeliveriesFrames` writes the same bytes for deliveries in
    /// its grouped order.
    mutating func writeWireDeliveryGroups(_ deliveries: [WireDelivery]) throws(ProtocolError) {
        var runs: [Range<Int>] = []
        var start = 0
        for index in deliveries.indices.dropFirst() {
            let (a, b) = (deliveries[index - 1], deliveries[index])
            if DeliveryEnvelope(of: a) != DeliveryEnvelope(of: b) || a.headers != b.headers || a.payload != b.payload {
                runs.append(start..<index)
                start = index
            }
        }
        if !deliveries.isEmpty { runs.append(start..<deliveries.count) }
        try self.writeWireCount(runs.count, field: "groups")
        for run in runs {
            let head = deliveries[run.lowerBound]
            self.writeInteger(head.id.messageSequence)
            self.writeInteger(head.platform.code)
            self.writeWireTimestamp(head.expiry)
            self.writeWireBool(head.isDeletedMessagesMarker)
            try self.writeWireCount(head.headers.count, field: "headers")
            for header in head.headers {
                try self.writeWireString(header.name, field: "headers")
                try self.writeWireString(header.value, field: "headers")
            }
            try self.writeWireBytes(head.payload, field: "payload")
            try self.writeWireCount(run.count, field: "recipients")
            for delivery in deliveries[run] {
                self.writeInteger(delivery.id.slot)
                self.writeWireFID(delivery.fid)
                try self.writeWireOptionalString(delivery.token?.value, field: "token")
                try self.writeWireOptionalString(delivery.apnsToken?.hex, field: "apnsToken")
            }
        }
    }

    mutating func writeWireItemResults(_ results: [BatchItemResult]) throws(ProtocolError) {
        try self.writeWireCount(results.count, field: "results")
        for result in results { self.writeInteger(result.wireValue) }
    }

    /// REGISTER's fields after the project (REGISTER_BATCH repeats them per item).
    mutating func writeWireRegistrationFields(_ fields: RegistrationFields) throws(ProtocolError) {
        try self.writeWireOptionalString(fields.offeredFID, field: "fid")
        try self.writeWireOptionalString(fields.token, field: "token")
        self.writeInteger(fields.platform.code)
        try self.writeWireString(fields.appID, field: "appId")
        try self.writeWireOptionalString(fields.deviceName, field: "deviceName")
        try self.writeWireOptionalString(fields.deviceOS, field: "deviceOs")
        try self.writeWireOptionalString(fields.deviceType, field: "deviceType")
        try self.writeWireOptionalString(fields.apnsToken, field: "apnsToken")
    }

    /// REGISTER's reply: flags, then the installation.
    mutating func writeWireRegistrationResult(_ result: RegistrationResult, credentials: InstallationCredentials? = nil) throws(ProtocolError) {
        let flags = (result.fidWasAssigned ? 1 : 0) | (result.isExisting ? 2 : 0) | (credentials != nil ? 4 : 0)
        self.writeInteger(UInt8(flags))
        try self.writeWireInstallation(result.installation)
        if let credentials {
            try self.writeWireString(credentials.refreshToken, field: "refreshToken")
            try self.writeWireString(credentials.authToken.token, field: "authToken")
            self.writeWireTimestamp(credentials.authToken.expiresAt)
        }
    }

    /// A REGISTER_BATCH_FIDS item: status 0, flags and the FID, or an `error`.
    mutating func writeWireRegistrationReceipt(_ receipt: RegistrationReceipt) throws(ProtocolError) {
        switch receipt {
        case .registered(let fid, let fidWasAssigned, let isExisting):
            self.writeInteger(UInt8(0))
            self.writeInteger(UInt8((fidWasAssigned ? 1 : 0) | (isExisting ? 2 : 0)))
            self.writeWireFID(fid)
        case .failed(let error):
            try self.writeWireError(error)
        }
    }

    /// `error`: status, message, field, violations.
    mutating func writeWireError(_ error: FanoutError) throws(ProtocolError) {
        self.writeInteger(error.code.wireValue)
        try self.writeWireErrorDetails(error)
    }

    /// `error` after its status.
    mutating func writeWireErrorDetails(_ error: FanoutError) throws(ProtocolError) {
        try self.writeWireString(String(error.message.prefix(2048)), field: "message")
        try self.writeWireOptionalString(error.field, field: "field")
        try self.writeWireCount(error.violations.count, field: "violations")
        for violation in error.violations {
            try self.writeWireString(violation.field, field: "violation field")
            try self.writeWireString(violation.description, field: "violation description")
        }
    }

    /// A SEND recipient: status 0, or an `error`.
    mutating func writeWireRecipientResult(_ result: RecipientResult) throws(ProtocolError) {
        switch result {
        case .ok: self.writeInteger(UInt8(0))
        case .failed(let error): try self.writeWireError(error)
        }
    }

    /// `platform report`: platform, then ten `u32`s (section 3).
    mutating func writeWirePlatformReport(_ r: PlatformSendReport) {
        func u32(_ value: Int) -> UInt32 { UInt32(clamping: value) }
        self.writeInteger(r.platform.code)
        self.writeMultipleIntegers(u32(r.renderedBytes), u32(r.limit ?? 0), u32(r.audience), u32(r.enqueued), u32(r.refused))
        self.writeMultipleIntegers(u32(r.skippedWithoutToken), u32(r.skippedStale), u32(r.collapsed), u32(r.dropped), u32(r.expired))
    }

    /// A REGISTER_BATCH item: status 0 and REGISTER's reply, or an `error`.
    mutating func writeWireRegistrationOutcome(_ outcome: RegistrationOutcome) throws(ProtocolError) {
        switch outcome {
        case .registered(let result):
            self.writeInteger(UInt8(0))
            try self.writeWireRegistrationResult(result)
        case .failed(let error):
            try self.writeWireError(error)
        }
    }
}

extension PayloadReader {
    mutating func installation(_ field: @autoclosure () -> String) throws(ProtocolError) -> Installation {
        let slot = try self.u32(field() + ".slot")
        let generation = try self.u32(field() + ".generation")
        let fid = try self.fid(field() + ".fid")
        let token = try self.optionalToken(field() + ".token")
        let platform = try self.platform(field() + ".platform")
        let appID = try self.model(field() + ".app id", AppID.init)
        let name = try self.optionalString(field() + ".device name")
        let os = try self.optionalString(field() + ".device os")
        let type = try self.optionalString(field() + ".device type")
        let device: DeviceDetails
        do {
            device = try DeviceDetails(name: name, os: os, type: type)
        } catch {
            throw self.error("\(field()).device is not valid")
        }
        let apnsToken = try self.optionalModel(field() + ".apns token", APNsDeviceToken.init)
        let user = try self.optionalModel(field() + ".user", UserID.init)
        return Installation(
            slot: slot,
            generation: generation,
            fid: fid,
            token: token,
            platform: platform,
            appID: appID,
            device: device,
            apnsToken: apnsToken,
            user: user,
            createdAt: try self.timestamp(field() + ".created at"),
            lastSeen: try self.timestamp(field() + ".last seen")
        )
    }

    mutating func installations(_ field: @autoclosure () -> String) throws(ProtocolError) -> [Installation] {
        try self.list(field(), minimumElementSize: 40) { (reader: inout PayloadReader, name: () -> String) throws(ProtocolError) in
            try reader.installation(name())
        }
    }

    mutating func delivery(_ field: @autoclosure () -> String) throws(ProtocolError) -> WireDelivery {
        let sequence = try self.u64(field() + ".sequence")
        let slot = try self.u32(field() + ".slot")
        return WireDelivery(
            id: DeliveryID(messageSequence: sequence, slot: slot),
            fid: try self.fid(field() + ".fid"),
            token: try self.optionalToken(field() + ".token"),
            apnsToken: try self.optionalAPNsToken(field() + ".apnsToken"),
            platform: try self.platform(field() + ".platform"),
            expiry: try self.timestamp(field() + ".expiry"),
            isInFlight: try self.bool(field() + ".in flight"),
            isDeletedMessagesMarker: try self.bool(field() + ".marker"),
            headers: try self.deliveryHeaders(field() + ".headers"),
            payload: try self.bytes(field() + ".payload")
        )
    }

    mutating func deliveryHeaders(_ field: String) throws(ProtocolError) -> [DeliveryHeader] {
        try self.list(field, minimumElementSize: 4) { (reader: inout PayloadReader, name: () -> String) throws(ProtocolError) in
            DeliveryHeader(name: try reader.string(name() + ".name"), value: try reader.string(name() + ".value"))
        }
    }

    /// DELIVERIES' `list<group>`, expanded into its deliveries in order; a group's deliveries
    /// share its headers and payload.
    mutating func deliveryGroups(_ field: String) throws(ProtocolError) -> [WireDelivery] {
        let groups = try self.count(field, minimumElementSize: 30)
        var deliveries: [WireDelivery] = []
        let tokens = ReceivedTokens(capacity: self.remaining)
        for group in 0..<groups {
            let name = "\(field)[\(group)]"
            let sequence = try self.u64(name + ".sequence")
            let platform = try self.platform(name + ".platform")
            let expiry = try self.timestamp(name + ".expiry")
            let isMarker = try self.bool(name + ".marker")
            let headers = try self.deliveryHeaders(name + ".headers")
            let payload = try self.bytes(name + ".payload")
            let recipients = try self.count(name + ".recipients", minimumElementSize: 8)
            if deliveries.isEmpty {
                deliveries.reserveCapacity(recipients)  // (reserving again for each group grew it one group at a time)
            }
            // Each recipient is the group's delivery with its own id, FID and tokens set in place:
            // appending a `WireDelivery` made from all its fields copied it through a temporary
            // (every reference in it retained and then released once more).
            let group = WireDelivery(
                id: DeliveryID(messageSequence: sequence, slot: 0), fid: .placeholder, token: nil, platform: platform, expiry: expiry,
                isInFlight: false, isDeletedMessagesMarker: isMarker, headers: headers, payload: payload
            )
            for recipient in 0..<recipients {
                // A field's name is made only for an error.
                func field(_ part: StaticString) -> String { "\(name).recipients[\(recipient)].\(part)" }
                let slot = try self.u32(field("slot"))
                let fid = try self.fid(field("fid"))
                let token = try self.optionalToken(field("token"), keptIn: tokens)
                let apnsToken = try self.optionalAPNsToken(field("apnsToken"))
                deliveries.append(group)
                deliveries[deliveries.count - 1].setRecipient(slot: slot, fid: fid, token: token, apnsToken: apnsToken)
            }
        }
        return deliveries
    }

    mutating func itemResults(_ field: @autoclosure () -> String) throws(ProtocolError) -> [BatchItemResult] {
        try self.list(field()) { (reader: inout PayloadReader, name: () -> String) throws(ProtocolError) in
            BatchItemResult(wireValue: try reader.u8(name()))
        }
    }

    /// REGISTER's fields; a batch item's valid token and app id are kept in `block`, its frame's.
    mutating func registrationFields(_ field: @autoclosure () -> String, keepingIn block: ReceivedTokens? = nil) throws(ProtocolError) -> RegistrationFields {
        // The field's name is made only for an error (a batch item's is "registrations[i]").
        func prefix() -> String {
            let name = field()
            return name.isEmpty ? "" : name + "."
        }
        let offered = try self.optionalOfferedFID(prefix() + "fid")
        let token = try self.isPresent(prefix() + "token")
            ? try self.kept(prefix() + "token", in: block, isValid: { RegistrationToken.isValid(utf8: $0) }, keep: RegistrationToken.init(keptIn:)) : nil
        let platform = try self.platform(prefix() + "platform")
        return RegistrationFields(
            offered: offered,
            token: token,
            platform: platform,
            appID: try self.kept(prefix() + "appId", in: block, isValid: AppID.isValid(utf8:), keep: AppID.init(keptIn:)),
            deviceName: try self.optionalString(prefix() + "deviceName"),
            deviceOS: try self.optionalString(prefix() + "deviceOs"),
            deviceType: try self.optionalString(prefix() + "deviceType"),
            apnsToken: try self.optionalString(prefix() + "apnsToken")
        )
    }

    /// REGISTER_BATCH's (and REGISTER_BATCH_FIDS's) items, their valid tokens and app ids kept in
    /// one block.
    mutating func registrationBatch() throws(ProtocolError) -> [RegistrationFields] {
        let block = ReceivedTokens(capacity: self.remaining)
        // Each item is at least 9 bytes: two absent optionals, a platform, an app id's length, four absent optionals.
        return try self.list("registrations", minimumElementSize: 9) { (reader: inout PayloadReader, field: () -> String) throws(ProtocolError) in
            try reader.registrationFields(field(), keepingIn: block)
        }
    }

    mutating func registrationResult(_ field: @autoclosure () -> String) throws(ProtocolError) -> RegistrationResult {
        try self.registrationResult(field(), credentialsMayFollow: false).result
    }

    /// REGISTER's reply: flags bit 2 (only where `credentialsMayFollow`) says credentials follow
    /// the installation.
    mutating func registrationResult(
        _ field: @autoclosure () -> String,
        credentialsMayFollow: Bool
    ) throws(ProtocolError) -> (result: RegistrationResult, credentialsFollow: Bool) {
        let flags = try self.u8(field() + " flags")
        let known: UInt8 = credentialsMayFollow ? 7 : 3
        guard flags & ~known == 0 else { throw self.error("\(field()) flags has unknown bits (\(flags))") }
        let result = RegistrationResult(
            installation: try self.installation(field() + ".installation"),
            fidWasAssigned: flags & 1 != 0,
            isExisting: flags & 2 != 0
        )
        return (result, flags & 4 != 0)
    }

    /// `error`, whose status was read already.
    mutating func errorDetails(_ code: FanoutError.Code, _ field: @autoclosure () -> String) throws(ProtocolError) -> FanoutError {
        var error = FanoutError(code, try self.string(field() + ".message"), field: try self.optionalString(field() + ".field"))
        error.violations = try self.list(field() + ".violations", minimumElementSize: 4) { (reader: inout PayloadReader, name: () -> String) throws(ProtocolError) in
            FieldViolation(field: try reader.string(name() + ".field"), description: try reader.string(name() + ".description"))
        }
        return error
    }

    mutating func recipientResult(_ field: @autoclosure () -> String) throws(ProtocolError) -> RecipientResult {
        let status = try self.u8(field() + ".status")
        guard status != 0 else { return .ok }
        return .failed(try self.errorDetails(FanoutError.Code(wireValue: status), field()))
    }

    mutating func platformReport(_ field: @autoclosure () -> String) throws(ProtocolError) -> PlatformSendReport {
        let platform = try self.platform(field() + ".platform")
        let renderedBytes = Int(try self.u32(field() + ".rendered bytes"))
        let limit = Int(try self.u32(field() + ".limit"))
        var report = PlatformSendReport(platform: platform, renderedBytes: renderedBytes, limit: limit == 0 ? nil : limit)
        report.audience = Int(try self.u32(field() + ".audience"))
        report.enqueued = Int(try self.u32(field() + ".enqueued"))
        report.refused = Int(try self.u32(field() + ".refused"))
        report.skippedWithoutToken = Int(try self.u32(field() + ".skipped without token"))
        report.skippedStale = Int(try self.u32(field() + ".skipped stale"))
        report.collapsed = Int(try self.u32(field() + ".collapsed"))
        report.dropped = Int(try self.u32(field() + ".dropped"))
        report.expired = Int(try self.u32(field() + ".expired"))
        return report
    }

    mutating func registrationOutcome(_ field: @autoclosure () -> String) throws(ProtocolError) -> RegistrationOutcome {
        let status = try self.u8(field() + ".status")
        guard status != 0 else { return .registered(try self.registrationResult(field())) }
        return .failed(try self.errorDetails(FanoutError.Code(wireValue: status), field()))
    }

    /// A REGISTER_BATCH_FIDS item: status 0, flags and the FID, or an `error`.
    mutating func registrationReceipt(_ field: @autoclosure () -> String) throws(ProtocolError) -> RegistrationReceipt {
        let status = try self.u8(field() + ".status")
        guard status == 0 else { return .failed(try self.errorDetails(FanoutError.Code(wireValue: status), field())) }
        let flags = try self.u8(field() + " flags")
        guard flags & ~3 == 0 else { throw self.error("\(field()) flags has unknown bits (\(flags))") }
        return .registered(fid: try self.fid(field() + ".fid"), fidWasAssigned: flags & 1 != 0, isExisting: flags & 2 != 0)
    }

    /// A `u64` counter as an `Int`; a value past `Int.max` is a protocol error.
    mutating func count64(_ field: @autoclosure () -> String) throws(ProtocolError) -> Int {
        let value = try self.u64(field())
        guard value <= UInt64(Int.max) else { throw self.error("\(field()) is out of range") }
        return Int(value)
    }
}
