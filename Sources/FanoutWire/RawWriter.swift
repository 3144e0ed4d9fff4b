/// Big-endian writes into memory sized beforehand (`writeDeliveryFrame`, `writeDeliveriesFrames`):
/// one `ByteBuffer` write for a whole frame.
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

    /// `string`: a `u16` length (checked by the caller), then the UTF-8.
    mutating func string(_ string: String) {
        var string = string
        string.withUTF8 { utf8 in
            self.integer(UInt16(utf8.count))
            self.bytes(utf8)
        }
    }

    mutating func optionalString(_ string: String?) {
        guard let string else { return self.integer(UInt8(0)) }
        self.integer(UInt8(1))
        self.string(string)
    }
}
