/// Where a segment stops being readable, and why. Offsets are bytes from the start of the file.
package struct WALDamage: Error, Hashable, Sendable, CustomStringConvertible {
    package var offset: Int
    package var reason: String

    package var description: String { "at byte \(self.offset): \(self.reason)" }
}

/// A segment header field that does not hold what the rest of the directory says it must.
package struct WALHeaderDamage: Hashable, Sendable, CustomStringConvertible {
    /// The field: `magic`, `version`, `flags`, `reserved`, `segment index` or `first LSN`.
    package var field: String
    package var found: String
    package var expected: String

    package var description: String { "header field \(self.field) reads \(self.found), expected \(self.expected)" }
}

/// A batch of records as read back, with the LSN of its first record.
package struct WALBatch: Hashable, Sendable {
    package var firstLSN: UInt64
    /// How many records the batch holds (`records` is empty when the reader only checked it).
    package var count: Int
    package var records: [WALRecord]
    /// The byte offset of this batch in its segment.
    package var offset: Int
    /// The byte offset just past this batch in its segment.
    package var endOffset: Int

    /// The LSN after the batch's last record.
    package var endLSN: UInt64 { self.firstLSN + UInt64(self.count) }
}

/// What a segment holds: its header, every batch up to the first damage, that damage (nil when the
/// whole file is good), and whether anything valid follows the damage (which makes it corruption,
/// not a torn write). A pure function of the bytes, so recovery can be tested without files.
package struct WALSegmentContents: Sendable {
    /// The segment index: the header's, or the file name's when the header's is damaged.
    package var index: UInt64
    /// The LSN of the first record: the first batch's (its header is checksummed), else the header's.
    package var firstLSN: UInt64
    /// Header fields that contradict the file name or the first batch (a rewrite of the header mends them).
    package var headerDamage: [WALHeaderDamage] = []
    package var batches: [WALBatch]
    /// Bytes from the start of the file to the end of the last good batch (what a cut keeps).
    package var validLength: Int
    package var damage: WALDamage?
    /// The first batch that checks out after `damage` (its offset and first LSN): the damage is
    /// then corruption, never a torn write.
    package var resumesAt: (offset: Int, lsn: UInt64)?
    /// The LSN after the last record readable anywhere in the file, after the damage included.
    package var highestEndLSN: UInt64
    /// The file's size.
    package var size: Int
    /// The zeros after the last batch, to the end of the file: space the writer filled ahead of
    /// its batches, not damage (0 when the file ends with a batch, or with damage).
    package var freeBytes = 0

    /// The LSN the next record after the good batches would have.
    package var nextLSN: UInt64 {
        self.batches.last?.endLSN ?? self.firstLSN
    }

    /// The LSN of the first record lost to `damage` (the one after the good batches).
    package var damagedLSN: UInt64 { self.nextLSN }
}

package enum WALSegmentReader {
    /// Reads a segment file's bytes. `expectedIndex` is the index in the file's name.
    ///
    /// A header that is too short or names an unknown version while its first batch does not read
    /// as this version is an error: nothing in such a file is trusted. Any other damaged header
    /// field is reported in `headerDamage` and the batches are read all the same. Damage after the
    /// header is returned in `damage`, with every batch before it; the rest of the file is then
    /// searched for a batch that checks out (`resumesAt`).
    ///
    /// - Parameter decodeRecords: `false` checks checksums, lengths and LSNs only (start-up's scan);
    ///   the batches then carry no records.
    package static func read(_ bytes: [UInt8], expectedIndex: UInt64? = nil, decodeRecords: Bool = true) throws(WALDamage) -> WALSegmentContents {
        try Self.read(bytes, expectedIndex: expectedIndex, decodeRecords: decodeRecords, handingOver: false) { _ in }
    }

    /// Reads a segment file's bytes as `read(_:expectedIndex:decodeRecords:)` does, giving each
    /// good batch, records decoded, to `emit` as soon as it is read (recovery applies a segment's
    /// first batches while the rest decode); the returned batches carry no records.
    package static func read(_ bytes: [UInt8], expectedIndex: UInt64? = nil, emit: (WALBatch) -> Void) throws(WALDamage) -> WALSegmentContents {
        try Self.read(bytes, expectedIndex: expectedIndex, decodeRecords: true, handingOver: true, emit: emit)
    }

    /// `handingOver`: each good batch goes to `emit`, and is kept without its records.
    private static func read(
        _ bytes: [UInt8],
        expectedIndex: UInt64?,
        decodeRecords: Bool,
        handingOver: Bool,
        emit: (WALBatch) -> Void
    ) throws(WALDamage) -> WALSegmentContents {
        guard bytes.count >= WALFormat.segmentHeaderSize else {
            throw WALDamage(offset: 0, reason: "the segment header is truncated (\(bytes.count) of \(WALFormat.segmentHeaderSize) bytes)")
        }
        var header = BinaryReader(bytes, from: 8, to: WALFormat.segmentHeaderSize)
        // The header is 32 bytes and was length-checked: these reads cannot fail.
        let version = (try? header.read(UInt16.self)) ?? 0
        let flags = (try? header.read(UInt16.self)) ?? 0
        let reserved = (try? header.read(UInt32.self)) ?? 0
        let headerIndex = (try? header.read(UInt64.self)) ?? 0
        let headerLSN = (try? header.read(UInt64.self)) ?? 0
        let first = try? self.readBatch(bytes, at: WALFormat.segmentHeaderSize, expectedLSN: nil, decodeRecords: decodeRecords)

        var damage: [WALHeaderDamage] = []
        let magic = Array(bytes[0..<8])
        if magic != WALFormat.magic {
            guard first != nil else { throw WALDamage(offset: 0, reason: "not a fanout WAL segment (bad magic)") }
            damage.append(WALHeaderDamage(field: "magic", found: Self.hex(magic), expected: Self.hex(WALFormat.magic)))
        }
        if version != WALFormat.version {
            guard first != nil else {
                throw WALDamage(offset: 8, reason: "segment format version \(version) is not supported (this build reads \(WALFormat.version))")
            }
            damage.append(WALHeaderDamage(field: "version", found: "\(version)", expected: "\(WALFormat.version)"))
        }
        if flags != 0 { damage.append(WALHeaderDamage(field: "flags", found: "\(flags)", expected: "0")) }
        if reserved != 0 { damage.append(WALHeaderDamage(field: "reserved", found: "\(reserved)", expected: "0")) }
        var index = headerIndex
        if let expectedIndex, headerIndex != expectedIndex {
            damage.append(WALHeaderDamage(field: "segment index", found: "\(headerIndex)", expected: "\(expectedIndex) (the file name's)"))
            index = expectedIndex
        }
        var firstLSN = headerLSN
        if let first, first.firstLSN != headerLSN {
            damage.append(WALHeaderDamage(field: "first LSN", found: "\(headerLSN)", expected: "\(first.firstLSN) (the first batch's)"))
            firstLSN = first.firstLSN
        }

        var contents = WALSegmentContents(
            index: index,
            firstLSN: firstLSN,
            headerDamage: damage,
            batches: [],
            validLength: WALFormat.segmentHeaderSize,
            highestEndLSN: firstLSN,
            size: bytes.count
        )
        var offset = WALFormat.segmentHeaderSize
        var expectedLSN = firstLSN
        func accept(_ batch: WALBatch) {
            if handingOver {
                emit(batch)
                var kept = batch
                kept.records = []
                contents.batches.append(kept)
            } else {
                contents.batches.append(batch)
            }
            expectedLSN = batch.endLSN
            offset = batch.endOffset
            contents.validLength = offset
            contents.highestEndLSN = expectedLSN
        }
        // The first batch was read for the header's cross-check: it is not read again.
        if let first { accept(first) }
        while offset < bytes.count {
            if Self.isZero(bytes, from: offset) {
                contents.freeBytes = bytes.count - offset
                break
            }
            do throws(WALDamage) {
                accept(try self.readBatch(bytes, at: offset, expectedLSN: expectedLSN, decodeRecords: decodeRecords))
            } catch {
                contents.damage = error
                break
            }
        }
        if let damage = contents.damage {
            Self.searchPast(damage, in: bytes, lsn: expectedLSN, into: &contents)
        }
        return contents
    }

    /// Looks for batches that check out after `damage`: the first is `resumesAt`, and the batches
    /// that follow it raise `highestEndLSN`.
    private static func searchPast(_ damage: WALDamage, in bytes: [UInt8], lsn: UInt64, into contents: inout WALSegmentContents) {
        var offset = damage.offset + 1
        while offset + WALFormat.batchHeaderSize <= bytes.count {
            guard Self.mayStartBatch(bytes, at: offset, notBefore: lsn),
                let batch = try? self.readBatch(bytes, at: offset, expectedLSN: nil, decodeRecords: false)
            else {
                offset += 1
                continue
            }
            if contents.resumesAt == nil { contents.resumesAt = (offset, batch.firstLSN) }
            contents.highestEndLSN = max(contents.highestEndLSN, batch.endLSN)
            offset = batch.endOffset
        }
    }

    /// Whether every byte from `offset` to the end is zero (a batch's header stops it within its
    /// first bytes).
    private static func isZero(_ bytes: [UInt8], from offset: Int) -> Bool {
        bytes.withUnsafeBytes { raw in
            UnsafeRawBufferPointer(rebasing: raw[offset...]).allSatisfy { $0 == 0 }
        }
    }

    /// A cheap test of a batch header's fixed fields, so that a search past damage computes a
    /// checksum only where a batch could start: a length that fits, at least one record, known
    /// flags, zero reserved bytes, and an LSN at or after the damaged one that the rest of the file
    /// could reach.
    private static func mayStartBatch(_ bytes: [UInt8], at offset: Int, notBefore lsn: UInt64) -> Bool {
        bytes.withUnsafeBytes { raw in
            let length = UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
            let firstLSN = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self))
            let count = UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: offset + 16, as: UInt32.self))
            let flagsAndReserved = UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: offset + 20, as: UInt32.self))
            return Int(length) <= raw.count - offset - WALFormat.batchHeaderSize && count > 0
                && flagsAndReserved & ~UInt32(WALFormat.flagLZ4) == 0
                && firstLSN >= lsn && firstLSN - lsn <= UInt64(raw.count)
        }
    }

    private static func hex(_ bytes: [UInt8]) -> String {
        bytes.map { byte in
            let digits = String(byte, radix: 16)
            return digits.count == 1 ? "0" + digits : digits
        }.joined()
    }

    /// Reads the batch at `offset`. `expectedLSN` nil accepts any first LSN.
    private static func readBatch(_ bytes: [UInt8], at offset: Int, expectedLSN: UInt64?, decodeRecords: Bool) throws(WALDamage) -> WALBatch {
        guard bytes.count - offset >= WALFormat.batchHeaderSize else {
            throw WALDamage(offset: offset, reason: "a truncated batch header")
        }
        var header = BinaryReader(bytes, from: offset, to: offset + WALFormat.batchHeaderSize)
        do {
            let length = Int(try header.read(UInt32.self))
            let storedCRC = try header.read(UInt32.self)
            let firstLSN = try header.read(UInt64.self)
            let count = Int(try header.read(UInt32.self))
            let flags = try header.read(UInt8.self)
            _ = try header.readBytes(3)
            let uncompressed = Int(try header.read(UInt32.self))
            guard length <= WALFormat.maximumBatchPayload, uncompressed <= WALFormat.maximumBatchPayload else {
                throw WALDamage(offset: offset, reason: "a batch length over the \(WALFormat.maximumBatchPayload)-byte limit")
            }
            let end = offset + WALFormat.batchHeaderSize + length
            guard end <= bytes.count else {
                throw WALDamage(offset: offset, reason: "a batch runs past the end of the file")
            }
            guard WALFormat.batchChecksum(bytes, at: offset, payloadLength: length) == storedCRC else {
                throw WALDamage(offset: offset, reason: "batch checksum mismatch")
            }
            // From here the bytes are what the writer wrote; a mismatch is a bug or a foreign file.
            if let expectedLSN, firstLSN != expectedLSN {
                throw WALDamage(offset: offset, reason: "batch starts at LSN \(firstLSN), expected \(expectedLSN)")
            }
            guard flags & ~WALFormat.flagLZ4 == 0 else {
                throw WALDamage(offset: offset, reason: "unknown batch flags \(flags)")
            }
            guard count > 0 else { throw WALDamage(offset: offset, reason: "a batch without records") }
            if !decodeRecords {
                guard count <= uncompressed / 5 else {
                    throw WALDamage(offset: offset, reason: "a record count the payload cannot hold")
                }
                return WALBatch(firstLSN: firstLSN, count: count, records: [], offset: offset, endOffset: end)
            }
            var payload = Array(bytes[(offset + WALFormat.batchHeaderSize)..<end])
            if flags & WALFormat.flagLZ4 != 0 {
                guard let expanded = payload.withUnsafeBytes({ LZ4.decompress($0, originalSize: uncompressed, limit: WALFormat.maximumBatchPayload) }) else {
                    throw WALDamage(offset: offset, reason: "the LZ4 payload does not expand to its declared \(uncompressed) bytes")
                }
                payload = expanded
            } else if uncompressed != length {
                throw WALDamage(offset: offset, reason: "an uncompressed batch with two different lengths")
            }
            guard count <= payload.count / 5 else {
                throw WALDamage(offset: offset, reason: "a record count the payload cannot hold")
            }
            var records: [WALRecord] = []
            records.reserveCapacity(count)
            var reader = BinaryReader(payload)
            for _ in 0..<count {
                let recordLength = Int(try reader.read(UInt32.self))
                let start = reader.position
                _ = try reader.readBytes(recordLength)
                var recordReader = BinaryReader(payload, from: start, to: start + recordLength)
                records.append(try WALRecord.decode(from: &recordReader))
            }
            guard reader.remaining == 0 else {
                throw WALDamage(offset: offset, reason: "bytes after the last record of the batch")
            }
            return WALBatch(firstLSN: firstLSN, count: count, records: records, offset: offset, endOffset: end)
        } catch let damage as WALDamage {
            throw damage
        } catch let error as BinaryReader.Error {
            throw WALDamage(offset: offset, reason: "a malformed record in the batch (\(error.reason) at payload byte \(error.offset))")
        } catch {
            throw WALDamage(offset: offset, reason: "an unreadable batch")
        }
    }
}
