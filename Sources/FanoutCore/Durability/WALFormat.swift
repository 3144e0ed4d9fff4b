/// The on-disk layout of write-ahead log segments (normative text: docs/wal-format.md).
///
/// ```
/// segment header (32 bytes)
/// +----------------+---------+---------+----------+-----------------+-----------------+
/// | magic FANOUTWL | version | flags   | reserved | segment index   | first LSN       |
/// | 8 bytes        | u16     | u16 = 0 | u32 = 0  | u64             | u64             |
/// +----------------+---------+---------+----------+-----------------+-----------------+
/// then batches, back to back (28-byte header + payload)
/// +-----------+---------+-----------+--------------+-------+---------+--------------+---------+
/// | length    | crc32c  | first LSN | record count | flags | reserved| uncompressed | payload |
/// | u32       | u32     | u64       | u32          | u8    | 3 bytes | u32          | length  |
/// +-----------+---------+-----------+--------------+-------+---------+--------------+---------+
/// ```
/// All integers little-endian. The CRC covers the length field, bytes 8..<28 of the header and the
/// payload. Flag bit 0: the payload is an LZ4 block that expands to `uncompressed` bytes. The
/// (expanded) payload is the records, each `u32 length | u8 type | body`.
package enum WALFormat {
    package static let magic: [UInt8] = Array("FANOUTWL".utf8)
    package static let version: UInt16 = 1
    package static let segmentHeaderSize = 32
    package static let batchHeaderSize = 28
    /// Batches whose records take more bytes than this are LZ4-compressed (when that is smaller).
    package static let compressionThreshold = 4096
    /// liblz4's acceleration for batches. On the log of `fanout-load run register-batch` (600k
    /// registrations, 150 MB of records) 4 compressed 1.7x faster than liblz4's default of 1, to
    /// 76.3% of the records' size instead of 75.6%: the tokens are random at any setting.
    static let compressionAcceleration: Int32 = 4
    /// The writer fills a segment with zeros ahead of its batches up to the next multiple of this
    /// (at most the segment size); zeros after the last batch are free space, not damage.
    package static let fillStep = 4 << 20
    /// The largest batch payload, compressed or not; larger lengths are damage, never allocated.
    package static let maximumBatchPayload = 64 << 20
    static let flagLZ4: UInt8 = 1

    /// The 32-byte header of segment `index` whose first record is `firstLSN`.
    package static func segmentHeader(index: UInt64, firstLSN: UInt64) -> [UInt8] {
        var writer = BinaryWriter(capacity: Self.segmentHeaderSize)
        writer.append(Self.magic)
        writer.write(Self.version)
        writer.write(UInt16(0))
        writer.write(UInt32(0))
        writer.write(index)
        writer.write(firstLSN)
        return writer.bytes
    }

    /// One framed batch holding `records`, numbered from `firstLSN`.
    package static func batch(_ records: [WALRecord], firstLSN: UInt64) -> [UInt8] {
        var encoder = BatchEncoder()
        return encoder.batch(records, firstLSN: firstLSN)
    }

    /// A record's bytes (`u8 type | body`).
    package static func encode(_ record: WALRecord) -> [UInt8] {
        var writer = BinaryWriter(capacity: 64)
        record.encode(into: &writer)
        return writer.bytes
    }

    /// One framed batch of already-encoded records (tests frame arbitrary bytes with this).
    package static func batch(rawRecords records: [[UInt8]], firstLSN: UInt64) -> [UInt8] {
        var body = BinaryWriter(capacity: records.reduce(0) { $0 + $1.count + 4 })
        for record in records {
            body.write(UInt32(record.count))
            body.append(record)
        }
        var batch = BinaryWriter()
        Self.frame(body.bytes, count: records.count, firstLSN: firstLSN, into: &batch)
        return batch.bytes
    }

    /// Frames batches in two buffers kept from one batch to the next (the log writer's): each record
    /// is encoded in place after its length, and the payload compressed straight into the batch,
    /// so once the buffers have grown to the largest batch, a batch allocates nothing.
    package struct BatchEncoder {
        /// The records, each `u32 length | u8 type | body`.
        private var records = BinaryWriter(capacity: 0)
        private var framed = BinaryWriter(capacity: 0)

        package init() {}

        /// The framed batch holding `records`, numbered from `firstLSN`.
        package mutating func batch(_ records: [WALRecord], firstLSN: UInt64) -> [UInt8] {
            self.batch(appends: CollectionOfOne(records), firstLSN: firstLSN)
        }

        /// The framed batch holding the records of `appends` in order, numbered from `firstLSN`.
        package mutating func batch(appends: some Sequence<[WALRecord]>, firstLSN: UInt64) -> [UInt8] {
            self.records.removeAll()
            var count = 0
            for records in appends {
                for record in records {
                    self.records.writeLengthPrefixed { record.encode(into: &$0) }
                }
                count += records.count
            }
            self.framed.removeAll()
            WALFormat.frame(self.records.bytes, count: count, firstLSN: firstLSN, into: &self.framed)
            return self.framed.bytes
        }
    }

    /// Appends the batch of `count` records whose payload (uncompressed) is `records`: the header,
    /// then the payload, LZ4-compressed when it is larger than `compressionThreshold` and that makes
    /// it smaller.
    private static func frame(_ records: [UInt8], count: Int, firstLSN: UInt64, into writer: inout BinaryWriter) {
        let start = writer.bytes.count
        writer.write(UInt32(0))  // payload length, filled below
        writer.write(UInt32(0))  // CRC, filled below
        writer.write(firstLSN)
        writer.write(UInt32(count))
        writer.write(UInt8(0))  // flags, filled below
        writer.write(UInt8(0))
        writer.write(UInt16(0))
        writer.write(UInt32(records.count))
        // The compressed block when it is smaller than the records; else nothing is kept of it.
        var isCompressed = false
        if records.count > Self.compressionThreshold, records.count <= LZ4.maximumInputSize {
            records.withUnsafeBytes { input in
                writer.append(atMost: LZ4.compressBound(input.count)) { output in
                    guard let size = LZ4.compress(input, into: output, acceleration: Self.compressionAcceleration), size > 0, size < input.count else { return 0 }
                    isCompressed = true
                    return size
                }
            }
        }
        if !isCompressed {
            writer.append(records)
        }
        let payloadLength = writer.bytes.count - start - Self.batchHeaderSize
        writer.set(UInt32(payloadLength), at: start)
        writer.set(isCompressed ? Self.flagLZ4 : 0, at: start + 20)
        writer.set(Self.batchChecksum(writer.bytes, at: start, payloadLength: payloadLength), at: start + 4)
    }

    /// The CRC of the batch starting at `offset`: its length field, header bytes 8..<28, payload.
    static func batchChecksum(_ bytes: [UInt8], at offset: Int, payloadLength: Int) -> UInt32 {
        bytes.withUnsafeBytes { raw in
            let length = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[offset..<offset + 4]))
            let end = offset + Self.batchHeaderSize + payloadLength
            return CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[offset + 8..<end]), continuing: length)
        }
    }
}
