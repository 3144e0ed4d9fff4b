internal import FanoutModel
internal import NIOCore

/// Writes payload fields (docs/wire-protocol.md section 3). Strings longer than a `u16` count and
/// lists longer than a `u32` count cannot be encoded: `ProtocolError` naming the field.
extension ByteBuffer {
    mutating func writeWireBool(_ value: Bool) {
        self.writeInteger(value ? 1 : 0, as: UInt8.self)
    }

    /// `field` is made only for the error (a list's element names were built for every element).
    mutating func writeWireString(_ string: String, field: @autoclosure () -> String) throws(ProtocolError) {
        let count = string.utf8.count
        guard count <= Int(UInt16.max) else {
            throw ProtocolError(.invalidArgument, "\(field()) is \(count) bytes; at most \(UInt16.max) can be sent")
        }
        self.writeInteger(UInt16(count))
        self.writeString(string)
    }

    /// A FID as a `string` (22 bytes; 11 for a legacy Instance ID), written from its packed form without a `String`.
    mutating func writeWireFID(_ fid: FID) {
        fid.withUTF8 { bytes in
            self.writeInteger(UInt16(bytes.count))
            self.writeBytes(bytes)
        }
    }

    mutating func writeWireOptionalString(_ string: String?, field: String) throws(ProtocolError) {
        if let string {
            self.writeInteger(1, as: UInt8.self)
            try self.writeWireString(string, field: field)
        } else {
            self.writeInteger(0, as: UInt8.self)
        }
    }

    /// An optional registration token as an optional `string`, from its bytes wherever they are
    /// kept (a token is at most 4096 bytes: it always fits).
    mutating func writeWireOptionalToken(_ token: RegistrationToken?) {
        guard let token else {
            self.writeInteger(0, as: UInt8.self)
            return
        }
        self.writeInteger(1, as: UInt8.self)
        token.withUTF8 { bytes in
            self.writeInteger(UInt16(bytes.count))
            self.writeBytes(bytes)
        }
    }

    mutating func writeWireBytes(_ bytes: [UInt8], field: String) throws(ProtocolError) {
        guard bytes.count <= Int(UInt32.max) else {
            throw ProtocolError(.invalidArgument, "\(field) is too long to send")
        }
        self.writeInteger(UInt32(bytes.count))
        self.writeBytes(bytes)
    }

    mutating func writeWireCount(_ count: Int, field: String) throws(ProtocolError) {
        guard count <= Int(UInt32.max) else {
            throw ProtocolError(.invalidArgument, "\(field) has too many elements to send")
        }
        self.writeInteger(UInt32(count))
    }

    mutating func writeWireStrings(_ strings: [String], field: String) throws(ProtocolError) {
        try self.writeWireCount(strings.count, field: field)
        for (index, string) in strings.enumerated() {
            try self.writeWireString(string, field: "\(field)[\(index)]")
        }
    }

    /// A list of strings, written from the list's packed bytes.
    mutating func writeWireRegistrations(_ registrations: RegistrationList, field: String) throws(ProtocolError) {
        try self.writeWireCount(registrations.count, field: field)
        for index in registrations.indices where registrations.byteCount(at: index) > Int(UInt16.max) {
            throw ProtocolError(
                .invalidArgument, "\(field)[\(index)] is \(registrations.byteCount(at: index)) bytes; at most \(UInt16.max) can be sent"
            )
        }
        // In one write of their exact size: a write per string grew the buffer by doubling,
        // copying a SUBSCRIBE of 1000 tokens (165 KB) about ten times over, each time into fresh
        // pages, with a uniqueness check at every write.
        let size = 2 * registrations.count + registrations.totalByteCount
        self.writeWithUnsafeMutableBytes(minimumWritableBytes: size) { raw in
            var out = RawWriter(raw)
            for index in registrations.indices {
                registrations.withBytes(at: index) { out.stringBytes($0.assumingMemoryBound(to: UInt8.self)) }
            }
            return out.offset
        }
    }

    mutating func writeWireTimestamp(_ timestamp: Timestamp) {
        self.writeInteger(timestamp.millisecondsSinceEpoch)
    }
}
