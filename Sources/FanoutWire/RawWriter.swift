internal import FanoutModel
internal import NIOCore

/// Big-endian writes into memory sized beforehand (`writeDeliveryFrame`, `writeDeliveriesFrames`):
/// one `ByteBuffer` write for a whole frame. The `...Size` functions give what each write takes,
/// so that a frame is sized before it is written.
struct RawWriter {
    let raw: UnsafeMutableRawBufferPointer
    var offset = 0

    init(_ raw: UnsafeMutableRawBufferPointer) {
        self.raw = raw
    }

    mutating func integer<Value: FixedWidthInteger>(_ value: Value) {
        assert(self.offset + MemoryLayout<Value>.size <= self.raw.count, "the frame was sized too small")
        self.raw.storeBytes(of: value.bigEndian, toByteOffset: self.offset, as: Value.self)
        self.offset += MemoryLayout<Value>.size
    }

    mutating func bytes(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        assert(self.offset + bytes.count <= self.raw.count, "the frame was sized too small")
        (self.raw.baseAddress! + self.offset).copyMemory(from: base, byteCount: bytes.count)
        self.offset += bytes.count
    }

    mutating func bool(_ value: Bool) {
        self.integer(UInt8(value ? 1 : 0))
    }

    /// `string`: a `u16` length (checked by `stringSize`), then the UTF-8.
    mutating func string(_ string: String) {
        var string = string
        string.withUTF8 { self.stringBytes($0) }
    }

    /// A `string` from its UTF-8 bytes (at most 65535).
    mutating func stringBytes(_ utf8: UnsafeBufferPointer<UInt8>) {
        self.integer(UInt16(utf8.count))
        self.bytes(utf8)
    }

    mutating func optionalString(_ string: String?) {
        guard let string else { return self.integer(UInt8(0)) }
        self.integer(UInt8(1))
        self.string(string)
    }

    /// A recipient's token as an `optionalString` writes it.
    mutating func optionalToken(_ token: RecipientToken?) {
        switch token {
        case nil: self.integer(UInt8(0))
        case .string(let string): self.optionalString(string)
        case .bytes(let bytes):
            self.integer(UInt8(1))
            self.stringBytes(bytes.assumingMemoryBound(to: UInt8.self))
        }
    }

    /// A FID as a `string`, from its packed form.
    mutating func fid(_ fid: FID) {
        fid.withUTF8 { self.stringBytes($0) }
    }

    /// `bytes`: a `u32` length, then the bytes.
    mutating func lengthPrefixed(_ bytes: [UInt8]) {
        self.integer(UInt32(bytes.count))
        bytes.withUnsafeBufferPointer { self.bytes($0) }
    }

    /// A delivery's `list<(string name, string value)>` of headers.
    mutating func headers(_ headers: [DeliveryHeader]) {
        self.integer(UInt32(headers.count))
        for header in headers {
            self.string(header.name)
            self.string(header.value)
        }
    }

    /// What `string` writes.
    /// - Throws: `INVALID_ARGUMENT` naming `field` for a string over 65535 bytes.
    static func stringSize(_ string: String, _ field: String) throws(ProtocolError) -> Int {
        let count = string.utf8.count
        guard count <= Int(UInt16.max) else {
            throw ProtocolError(.invalidArgument, "\(field) is \(count) bytes; at most \(UInt16.max) can be sent")
        }
        return 2 + count
    }

    /// What `optionalString` writes.
    static func optionalStringSize(_ string: String?, _ field: String) throws(ProtocolError) -> Int {
        guard let string else { return 1 }
        return try 1 + Self.stringSize(string, field)
    }

    /// What `optionalToken` writes. Token bytes (from the engine's storage) are at most 4096.
    static func optionalTokenSize(_ token: RecipientToken?) throws(ProtocolError) -> Int {
        switch token {
        case nil: return 1
        case .string(let string): return try Self.optionalStringSize(string, "token")
        case .bytes(let bytes): return 1 + 2 + bytes.count
        }
    }

    /// What `fid` writes.
    static func fidSize(_ fid: FID) -> Int {
        2 + fid.utf8Count
    }

    /// What `headers` writes.
    static func headersSize(_ headers: [DeliveryHeader]) throws(ProtocolError) -> Int {
        var size = 4
        for header in headers {
            size += try Self.stringSize(header.name, "headers") + Self.stringSize(header.value, "headers")
        }
        return size
    }
}

extension ByteBuffer {
    /// Appends a frame whose payload, `payloadLength` bytes, `body` writes: the header and the
    /// payload in one write.
    mutating func writeSizedFrame(opcode: Opcode, requestID: UInt32, payloadLength: Int, _ body: (inout RawWriter) -> Void) {
        self.writeWithUnsafeMutableBytes(minimumWritableBytes: FrameHeader.size + payloadLength) { raw in
            var out = RawWriter(raw)
            out.integer(FrameHeader.currentVersion)
            out.integer(opcode.rawValue)
            out.integer(UInt16(0))
            out.integer(requestID)
            out.integer(UInt32(payloadLength))
            body(&out)
            assert(out.offset == FrameHeader.size + payloadLength, "the frame was sized wrong")
            return out.offset
        }
    }
}
