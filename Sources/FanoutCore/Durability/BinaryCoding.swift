/// Little-endian binary writing for the write-ahead log (the on-disk byte order, docs/wal-format.md).
struct BinaryWriter {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int = 256) {
        self.reserveCapacity(capacity)
    }

    /// Room for `count` bytes in all, so that writes up to them grow no storage.
    mutating func reserveCapacity(_ count: Int) {
        self.bytes.reserveCapacity(count)
    }

    mutating func write<I: FixedWidthInteger>(_ value: I) {
        withUnsafeBytes(of: value.littleEndian) { self.bytes.append(contentsOf: $0) }
    }

    mutating func write(_ bool: Bool) {
        self.bytes.append(bool ? 1 : 0)
    }

    /// A string: u32 byte count, then UTF-8.
    mutating func write(_ string: String) {
        self.write(UInt32(string.utf8.count))
        self.bytes.append(contentsOf: string.utf8)
    }

    /// An optional string: u8 presence, then the string.
    mutating func write(_ string: String?) {
        self.write(string != nil)
        if let string { self.write(string) }
    }

    /// A token as `write(_: String)` writes its string, from its bytes wherever they are kept.
    mutating func write(_ token: RegistrationToken) {
        token.withUTF8 { self.write(utf8: $0) }
    }

    /// An app id as `write(_: String)` writes its string, from its bytes wherever they are kept.
    mutating func write(_ appID: AppID) {
        appID.withUTF8 { self.write(utf8: $0) }
    }

    /// UTF-8 bytes as `write(_: String)` writes a string's.
    private mutating func write(utf8 bytes: UnsafeRawBufferPointer) {
        self.write(UInt32(bytes.count))
        self.bytes.append(contentsOf: bytes)
    }

    /// An optional token as `write(_: String?)` writes an optional string.
    mutating func write(_ token: RegistrationToken?) {
        self.write(token != nil)
        if let token { self.write(token) }
    }

    mutating func write(_ fid: FID) {
        let packed = fid.packed
        self.write(packed.high)
        self.write(packed.middle)
        self.write(packed.low)
    }

    mutating func write(_ timestamp: Timestamp) {
        self.write(timestamp.millisecondsSinceEpoch)
    }

    /// Appends `u32 count | count x u32`, the values in one copy.
    mutating func writeCounted(_ values: [UInt32]) {
        self.write(UInt32(values.count))
        self.append(atMost: values.count * 4) { raw in
            for (index, value) in values.enumerated() {
                raw.storeBytes(of: value.littleEndian, toByteOffset: index * 4, as: UInt32.self)
            }
            return values.count * 4
        }
    }

    /// Appends `u32 slot | u16 check` for each reference, in one copy (a subscription record of
    /// a thousand, appended an integer at a time, was two thousand appends).
    mutating func write(_ references: [SlotReference]) {
        self.append(atMost: references.count * SlotReference.encodedSize) { raw in
            for (index, reference) in references.enumerated() {
                let offset = index * SlotReference.encodedSize
                raw.storeBytes(of: reference.slot.littleEndian, toByteOffset: offset, as: UInt32.self)
                raw.storeBytes(of: reference.check.littleEndian, toByteOffset: offset + 4, as: UInt16.self)
            }
            return references.count * SlotReference.encodedSize
        }
    }

    mutating func append(_ bytes: [UInt8]) {
        self.bytes.append(contentsOf: bytes)
    }

    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        self.bytes.append(contentsOf: bytes)
    }

    /// Appends the bytes `fill` writes into a buffer of `maximum` bytes it is given; it returns how
    /// many it wrote (at most `maximum`).
    mutating func append(atMost maximum: Int, _ fill: (UnsafeMutableRawBufferPointer) -> Int) {
        let start = self.bytes.count
        self.bytes.append(contentsOf: repeatElement(0, count: maximum))
        let written = self.bytes.withUnsafeMutableBytes { fill(UnsafeMutableRawBufferPointer(rebasing: $0[start...])) }
        self.bytes.removeLast(maximum - min(max(written, 0), maximum))
    }

    /// Writes `u32 length | what body writes`.
    mutating func writeLengthPrefixed(_ body: (inout BinaryWriter) -> Void) {
        let start = self.bytes.count
        self.write(UInt32(0))
        body(&self)
        self.set(UInt32(self.bytes.count - start - 4), at: start)
    }

    /// Empties the writer and keeps its storage for what is written next.
    mutating func removeAll() {
        self.bytes.removeAll(keepingCapacity: true)
    }

    /// Overwrites a byte written earlier at `offset`.
    mutating func set(_ value: UInt8, at offset: Int) {
        self.bytes[offset] = value
    }

    /// Overwrites a u32 written earlier at `offset` (length back-filling).
    mutating func set(_ value: UInt32, at offset: Int) {
        withUnsafeBytes(of: value.littleEndian) { raw in
            for index in 0..<4 { self.bytes[offset + index] = raw[index] }
        }
    }
}

/// Reads what `BinaryWriter` wrote. Every read is bounds-checked and throws at the first byte that
/// does not fit; nothing traps on malformed input.
struct BinaryReader {
    struct Error: Swift.Error, Hashable, Sendable {
        var offset: Int
        var reason: String
    }

    private let bytes: [UInt8]
    private(set) var position: Int
    let end: Int

    init(_ bytes: [UInt8], from start: Int = 0, to end: Int? = nil) {
        self.bytes = bytes
        self.position = start
        self.end = min(end ?? bytes.count, bytes.count)
    }

    var remaining: Int { self.end - self.position }

    mutating func read<I: FixedWidthInteger>(_: I.Type) throws(Error) -> I {
        let size = MemoryLayout<I>.size
        guard self.remaining >= size else { throw Error(offset: self.position, reason: "truncated") }
        let value = self.bytes.withUnsafeBytes { raw in
            raw.loadUnaligned(fromByteOffset: self.position, as: I.self)
        }
        self.position += size
        return I(littleEndian: value)
    }

    /// `u32 count | count x u32`; a count the remaining bytes cannot hold is refused before anything
    /// is allocated.
    mutating func readCountedUInt32s() throws(Error) -> [UInt32] {
        let count = Int(try self.read(UInt32.self))
        guard self.remaining >= count * 4 else {
            throw Error(offset: self.position - 4, reason: "a count of \(count) values the record cannot hold")
        }
        let start = self.position
        let values = self.bytes.withUnsafeBytes { raw in
            (0..<count).map { UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: start + $0 * 4, as: UInt32.self)) }
        }
        self.position += count * 4
        return values
    }

    mutating func readBool() throws(Error) -> Bool {
        switch try self.read(UInt8.self) {
        case 0: return false
        case 1: return true
        default: throw Error(offset: self.position - 1, reason: "a boolean must be 0 or 1")
        }
    }

    mutating func readBytes(_ count: Int) throws(Error) -> ArraySlice<UInt8> {
        guard count >= 0, self.remaining >= count else { throw Error(offset: self.position, reason: "truncated") }
        defer { self.position += count }
        return self.bytes[self.position..<self.position + count]
    }

    /// A string of at most `limit` bytes of valid UTF-8.
    mutating func readString(limit: Int = 1 << 16) throws(Error) -> String {
        let count = Int(try self.read(UInt32.self))
        guard count <= limit else { throw Error(offset: self.position - 4, reason: "a string longer than \(limit) bytes") }
        let start = self.position
        let bytes = try self.readBytes(count)
        return try bytes.withUnsafeBufferPointer { buffer throws(Error) in
            guard UTF8Validation.isValid(buffer) else { throw Error(offset: start, reason: "a string is not valid UTF-8") }
            return String(decoding: buffer, as: UTF8.self)
        }
    }

    mutating func readOptionalString(limit: Int = 1 << 16) throws(Error) -> String? {
        try self.readBool() ? try self.readString(limit: limit) : nil
    }

    mutating func readFID() throws(Error) -> FID {
        let start = self.position
        let packed = (try self.read(UInt64.self), try self.read(UInt64.self), try self.read(UInt16.self))
        guard let fid = FID(packed: packed) else { throw Error(offset: start, reason: "not a valid FID") }
        return fid
    }

    mutating func readTimestamp() throws(Error) -> Timestamp {
        Timestamp(millisecondsSinceEpoch: try self.read(Int64.self))
    }
}
