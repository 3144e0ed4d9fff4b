internal import FanoutModel
internal import NIOCore

/// Reads one frame's payload field by field (docs/wire-protocol.md section 3). Every failure is a
/// `ProtocolError` naming the field and carrying the frame's request id; `finish` insists that
/// every byte was read.
///
/// It reads the payload's bytes in place, and lives only inside `decodeWhole`, which lends them:
/// each `ByteBuffer` read cost a uniqueness and an exclusivity check, several per delivery a
/// worker decodes (perf put the checks at about 7% of a worker's samples).
struct PayloadReader {
    private let bytes: UnsafeRawBufferPointer
    private var offset = 0
    let requestID: UInt32
    let opcode: Opcode

    private init(_ bytes: UnsafeRawBufferPointer, requestID: UInt32, opcode: Opcode) {
        self.bytes = bytes
        self.requestID = requestID
        self.opcode = opcode
    }

    var remaining: Int { self.bytes.count - self.offset }

    /// The next `count` bytes (at most `remaining`), read past.
    private mutating func take(_ count: Int) -> UnsafeRawBufferPointer {
        defer { self.offset += count }
        return UnsafeRawBufferPointer(rebasing: self.bytes[self.offset..<(self.offset + count)])
    }

    func error(_ message: String) -> ProtocolError {
        ProtocolError(.invalidArgument, "\(self.opcode): \(message)", requestID: self.requestID)
    }

    private mutating func integer<Integer: FixedWidthInteger>(_ field: @autoclosure () -> String, as: Integer.Type = Integer.self) throws(ProtocolError) -> Integer {
        guard MemoryLayout<Integer>.size <= self.remaining else {
            throw self.error("the payload ends inside \(field())")
        }
        return Integer(bigEndian: self.take(MemoryLayout<Integer>.size).loadUnaligned(as: Integer.self))
    }

    mutating func u8(_ field: @autoclosure () -> String) throws(ProtocolError) -> UInt8 { try self.integer(field()) }
    mutating func u16(_ field: @autoclosure () -> String) throws(ProtocolError) -> UInt16 { try self.integer(field()) }
    mutating func u32(_ field: @autoclosure () -> String) throws(ProtocolError) -> UInt32 { try self.integer(field()) }
    mutating func u64(_ field: @autoclosure () -> String) throws(ProtocolError) -> UInt64 { try self.integer(field()) }
    mutating func i64(_ field: @autoclosure () -> String) throws(ProtocolError) -> Int64 { try self.integer(field()) }

    mutating func bool(_ field: @autoclosure () -> String) throws(ProtocolError) -> Bool {
        switch try self.u8(field()) {
        case 0: return false
        case 1: return true
        case let other: throw self.error("\(field()) is not a bool (\(other))")
        }
    }

    /// A `string`'s bytes, made into a value by `make` (nil: the field is refused as `invalid`).
    private mutating func stringBytes<Value>(
        _ field: () -> String,
        invalid: String,
        _ make: (UnsafeRawBufferPointer) -> Value?
    ) throws(ProtocolError) -> Value {
        let count = Int(try self.u16(field()))
        guard count <= self.remaining else {
            throw self.error("the payload ends inside \(field())")
        }
        guard let value = make(self.take(count)) else {
            throw self.error("\(field()) is \(invalid)")
        }
        return value
    }

    mutating func string(_ field: @autoclosure () -> String) throws(ProtocolError) -> String {
        try self.stringBytes(field, invalid: "not valid UTF-8") { String(validatingUTF8Bytes: $0) }
    }

    /// A FID sent as a `string`, checked without making a `String`.
    mutating func fid(_ field: @autoclosure () -> String) throws(ProtocolError) -> FID {
        try self.stringBytes(field, invalid: "not valid") { FID(utf8: $0) ?? FID(legacyInstanceID: String(decoding: $0, as: UTF8.self)) }
    }

    /// A registration token sent as an optional `string`, checked before a `String` is made.
    mutating func optionalToken(_ field: @autoclosure () -> String) throws(ProtocolError) -> RegistrationToken? {
        try self.isPresent(field()) ? try self.stringBytes(field, invalid: "not valid", RegistrationToken.init(utf8:)) : nil
    }

    /// `optionalToken`, its bytes copied into `tokens` (a frame's block) rather than a `String`.
    mutating func optionalToken(_ field: @autoclosure () -> String, keptIn tokens: ReceivedTokens) throws(ProtocolError) -> RegistrationToken? {
        guard try self.isPresent(field()) else { return nil }
        return try self.stringBytes(field, invalid: "not valid") { bytes in
            guard RegistrationToken.isValid(utf8: bytes) else { return nil }
            return tokens.keep(bytes).map(RegistrationToken.init(keptIn:)) ?? RegistrationToken(validatedBytes: bytes)
        }
    }

    /// REGISTER's optional offered FID: parsed when it is one, else its text.
    mutating func optionalOfferedFID(_ field: @autoclosure () -> String) throws(ProtocolError) -> OfferedFID? {
        try self.isPresent(field()) ? try self.stringBytes(field, invalid: "not valid UTF-8", OfferedFID.init(utf8:)) : nil
    }

    /// A `string` that, when it is `Value` (`isValid`), is kept in `block` (a register batch's,
    /// when given and with room) as `keep` makes it; any other as its text, for the server to
    /// check and refuse by name.
    mutating func kept<Value>(
        _ field: @autoclosure () -> String,
        in block: ReceivedTokens?,
        isValid: (UnsafeRawBufferPointer) -> Bool,
        keep: (StoredToken) -> Value
    ) throws(ProtocolError) -> Decoded<Value> {
        try self.stringBytes(field, invalid: "not valid UTF-8") { bytes in
            if let block, isValid(bytes), let kept = block.keep(bytes) {
                return .value(keep(kept))
            }
            return String(validatingUTF8Bytes: bytes).map { .text($0) }
        }
    }

    /// An APNs device token sent as an optional `string`, checked before a `String` is made.
    mutating func optionalAPNsToken(_ field: @autoclosure () -> String) throws(ProtocolError) -> APNsDeviceToken? {
        try self.isPresent(field()) ? try self.stringBytes(field, invalid: "not valid", APNsDeviceToken.init(utf8:)) : nil
    }

    mutating func bytes(_ field: @autoclosure () -> String) throws(ProtocolError) -> [UInt8] {
        let count = Int(try self.u32(field()))
        guard count <= self.remaining else {
            throw self.error("the payload ends inside \(field())")
        }
        return Array(self.take(count))
    }

    mutating func isPresent(_ field: @autoclosure () -> String) throws(ProtocolError) -> Bool {
        switch try self.u8(field()) {
        case 0: return false
        case 1: return true
        case let other: throw self.error("\(field()) has an invalid optional tag (\(other))")
        }
    }

    mutating func optionalString(_ field: @autoclosure () -> String) throws(ProtocolError) -> String? {
        try self.isPresent(field()) ? try self.string(field()) : nil
    }

    /// A list's count, checked against the bytes left (each element takes at least `minimumElementSize`).
    mutating func count(_ field: @autoclosure () -> String, minimumElementSize: Int = 1) throws(ProtocolError) -> Int {
        let count = Int(try self.u32(field()))
        guard count <= self.remaining / max(minimumElementSize, 1) else {
            throw self.error("\(field()) announces \(count) elements but the payload is shorter")
        }
        return count
    }

    /// A list; `field` is evaluated at once (a list's name is a literal), an element's name only
    /// on an error.
    mutating func list<Element>(
        _ field: String,
        minimumElementSize: Int = 1,
        _ element: (inout PayloadReader, () -> String) throws(ProtocolError) -> Element
    ) throws(ProtocolError) -> [Element] {
        let count = try self.count(field, minimumElementSize: minimumElementSize)
        var elements: [Element] = []
        elements.reserveCapacity(count)
        for index in 0..<count {
            elements.append(try element(&self, { "\(field)[\(index)]" }))
        }
        return elements
    }

    mutating func strings(_ field: @autoclosure () -> String) throws(ProtocolError) -> [String] {
        try self.list(field(), minimumElementSize: 2) { (reader: inout PayloadReader, name: () -> String) throws(ProtocolError) in
            try reader.string(name())
        }
    }

    /// A list of strings read into one packed list (no `String` per element), each checked as
    /// UTF-8 as `string` checks it.
    mutating func registrations(_ field: String) throws(ProtocolError) -> RegistrationList {
        let count = try self.count(field, minimumElementSize: 2)
        var list = RegistrationList()
        list.reserveCapacity(count, bytes: self.remaining - 2 * count)
        for index in 0..<count {
            try self.stringBytes({ "\(field)[\(index)]" }, invalid: "not valid UTF-8") { (bytes: UnsafeRawBufferPointer) -> Void? in
                // Visible ASCII (every FID and token) is UTF-8: one pass over the bytes for both.
                if ASCII.isVisibleBytes(bytes) {
                    list.append(visibleASCII: bytes)
                } else {
                    guard UTF8Validation.isValid(bytes.assumingMemoryBound(to: UInt8.self)) else { return nil }
                    list.append(bytes: bytes)
                }
                return ()
            }
        }
        return list
    }

    mutating func platform(_ field: @autoclosure () -> String) throws(ProtocolError) -> Platform {
        let code = try self.u8(field())
        guard let platform = Platform(code: code) else {
            throw self.error("\(field()) is not a platform (\(code))")
        }
        return platform
    }

    mutating func timestamp(_ field: @autoclosure () -> String) throws(ProtocolError) -> Timestamp {
        Timestamp(millisecondsSinceEpoch: try self.i64(field()))
    }

    /// A model value built from a string the server produced; a value the model refuses is a protocol error.
    mutating func model<Value>(_ field: @autoclosure () -> String, _ make: (String) -> Value?) throws(ProtocolError) -> Value {
        let string = try self.string(field())
        guard let value = make(string) else {
            throw self.error("\(field()) is not valid")
        }
        return value
    }

    mutating func optionalModel<Value>(_ field: @autoclosure () -> String, _ make: (String) -> Value?) throws(ProtocolError) -> Value? {
        try self.isPresent(field()) ? try self.model(field(), make) : nil
    }

    /// Decodes a whole payload with `body`, insisting that it uses every byte. The reader (and
    /// the bytes it lends) must not outlive `body`.
    static func decodeWhole<Value>(
        _ payload: ByteBuffer,
        requestID: UInt32,
        opcode: Opcode,
        _ body: (inout PayloadReader) throws(ProtocolError) -> Value
    ) throws(ProtocolError) -> Value {
        try payload.withUnsafeReadableBytes { bytes -> Result<Value, ProtocolError> in
            var reader = PayloadReader(bytes, requestID: requestID, opcode: opcode)
            do throws(ProtocolError) {
                let value = try body(&reader)
                try reader.finish()
                return .success(value)
            } catch {
                return .failure(error)
            }
        }.get()
    }

    /// Whether every byte of the payload was read (for a trailing field that may be left out).
    var isAtEnd: Bool { self.remaining == 0 }

    /// Throws unless every byte of the payload was read.
    func finish() throws(ProtocolError) {
        guard self.remaining == 0 else {
            throw self.error("\(self.remaining) bytes after the last field")
        }
    }
}

extension String {
    /// The string for `bytes` if they are valid UTF-8. Not `String(validating:as:)`: that one looks
    /// up generic metadata on every call, which profiles showed at 12% of a consumer's CPU
    /// decoding deliveries (docs/performance.md); this validates once and builds the string on
    /// the standard library's specialized UTF-8 path.
    init?(validatingUTF8Bytes bytes: UnsafeRawBufferPointer) {
        let utf8 = bytes.assumingMemoryBound(to: UInt8.self)
        guard UTF8Validation.isValid(utf8) else { return nil }
        self = String(decoding: utf8, as: UTF8.self)
    }
}
