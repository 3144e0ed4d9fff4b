internal import FanoutModel
internal import NIOCore

// The structures several messages share (docs/wire-protocol.md section 3).

extension ByteBuffer {
    mutating func writeWireInstallation(_ i: Installation) throws(ProtocolError) {
        self.writeMultipleIntegers(i.slot, i.generation)
        try self.writeWireString(i.fid.string, field: "fid")
        try self.writeWireOptionalString(i.token?.value, field: "token")
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
        self.writeMultipleIntegers(d.id.messageSequence, d.id.slot)
        try self.writeWireString(d.fid.string, field: "fid")
        try self.writeWireOptionalString(d.token?.value, field: "token")
        self.writeInteger(d.platform.code)
        self.writeWireTimestamp(d.expiry)
        self.writeWireBool(d.isInFlight)
        self.writeWireBool(d.isDeletedMessagesMarker)
        try self.writeWireBytes(d.payload, field: "payload")
    }

    mutating func writeWireItemResults(_ results: [BatchItemResult]) throws(ProtocolError) {
        try self.writeWireCount(results.count, field: "results")
        for result in results { self.writeInteger(result.wireValue) }
    }
}

extension PayloadReader {
    mutating func installation(_ field: String) throws(ProtocolError) -> Installation {
        let slot = try self.u32(field + ".slot")
        let generation = try self.u32(field + ".generation")
        let fid = try self.model(field + ".fid", FID.init)
        let token = try self.optionalModel(field + ".token", RegistrationToken.init)
        let platform = try self.platform(field + ".platform")
        let appID = try self.model(field + ".app id", AppID.init)
        let name = try self.optionalString(field + ".device name")
        let os = try self.optionalString(field + ".device os")
        let type = try self.optionalString(field + ".device type")
        let device: DeviceDetails
        do {
            device = try DeviceDetails(name: name, os: os, type: type)
        } catch {
            throw self.error("\(field).device is not valid")
        }
        let apnsToken = try self.optionalModel(field + ".apns token", APNsDeviceToken.init)
        let user = try self.optionalModel(field + ".user", UserID.init)
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
            createdAt: try self.timestamp(field + ".created at"),
            lastSeen: try self.timestamp(field + ".last seen")
        )
    }

    mutating func installations(_ field: String) throws(ProtocolError) -> [Installation] {
        try self.list(field, minimumElementSize: 40) { (reader: inout PayloadReader, name: String) throws(ProtocolError) in
            try reader.installation(name)
        }
    }

    mutating func delivery(_ field: String) throws(ProtocolError) -> WireDelivery {
        let sequence = try self.u64(field + ".sequence")
        let slot = try self.u32(field + ".slot")
        return WireDelivery(
            id: DeliveryID(messageSequence: sequence, slot: slot),
            fid: try self.model(field + ".fid", FID.init),
            token: try self.optionalModel(field + ".token", RegistrationToken.init),
            platform: try self.platform(field + ".platform"),
            expiry: try self.timestamp(field + ".expiry"),
            isInFlight: try self.bool(field + ".in flight"),
            isDeletedMessagesMarker: try self.bool(field + ".marker"),
            payload: try self.bytes(field + ".payload")
        )
    }

    mutating func itemResults(_ field: String) throws(ProtocolError) -> [BatchItemResult] {
        try self.list(field) { (reader: inout PayloadReader, name: String) throws(ProtocolError) in
            BatchItemResult(wireValue: try reader.u8(name))
        }
    }

    /// A `u64` counter as an `Int`; a value past `Int.max` is a protocol error.
    mutating func count64(_ field: String) throws(ProtocolError) -> Int {
        let value = try self.u64(field)
        guard value <= UInt64(Int.max) else { throw self.error("\(field) is out of range") }
        return Int(value)
    }
}
