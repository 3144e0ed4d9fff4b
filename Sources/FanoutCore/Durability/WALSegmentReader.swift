/// Where a segment stops being readable, and why. Offsets are bytes from the start of the file.
public struct WALDamage: Error, Hashable, Sendable, CustomStringConvertible {
    public var offset: Int
    public var reason: String

    public var description: String { "at byte \(self.offset): \(self.reason)" }
}

/// A batch of records as read back, with the LSN of its first record.
public struct WALBatch: Hashable, Sendable {
    public var firstLSN: UInt64
    public var records: [WALRecord]
    /// The byte offset just past this batch in its segment.
    public var endOffset: Int
}

/// What a segment holds: its header, every batch up to the first damage, and that damage (nil when
/// the whole file is good). A pure function of the bytes, so recovery can be tested without files.
public struct WALSegmentContents: Sendable {
    public var index: UInt64
    public var firstLSN: UInt64
    public var batches: [WALBatch]
    /// Bytes from the start of the file to the end of the last good batch (what a repair keeps).
    public var validLength: Int
    public var damage: WALDamage?

    /// The LSN the next record after the good batches would have.
    public var nextLSN: UInt64 {
        guard let last = self.batches.last else { return self.firstLSN }
        return last.firstLSN + UInt64(last.records.count)
    }
}

public enum WALSegmentReader {
    /// Reads a segment file's bytes. A bad header (short, wrong magic, unknown version) is an error:
    /// nothing in the file can be trusted. Damage after the header (a torn or corrupt batch) is
    /// returned in `damage`, with every batch before it.
    public static func read(_ bytes: [UInt8]) throws(WALDamage) -> WALSegmentContents {
        guard bytes.count >= WALFormat.segmentHeaderSize else {
            throw WALDamage(offset: 0, reason: "the segment header is truncated (\(bytes.count) of \(WALFormat.segmentHeaderSize) bytes)")
        }
        guard Array(bytes[0..<8]) == WALFormat.magic else {
            throw WALDamage(offset: 0, reason: "not a fanout WAL segment (bad magic)")
        }
        var header = BinaryReader(bytes, from: 8, to: WALFormat.segmentHeaderSize)
        // The header is 32 bytes and was length-checked: these reads cannot fail.
        let version = (try? header.read(UInt16.self)) ?? 0
        guard version == WALFormat.version else {
            throw WALDamage(offset: 8, reason: "segment format version \(version) is not supported (this build reads \(WALFormat.version))")
        }
        _ = try? header.read(UInt16.self)
        _ = try? header.read(UInt32.self)
        let index = (try? header.read(UInt64.self)) ?? 0
        let firstLSN = (try? header.read(UInt64.self)) ?? 0

        var contents = WALSegmentContents(index: index, firstLSN: firstLSN, batches: [], validLength: WALFormat.segmentHeaderSize)
        var offset = WALFormat.segmentHeaderSize
        var expectedLSN = firstLSN
        while offset < bytes.count {
            do throws(WALDamage) {
                let batch = try self.readBatch(bytes, at: offset, expectedLSN: expectedLSN)
                contents.batches.append(batch)
                expectedLSN = batch.firstLSN + UInt64(batch.records.count)
                offset = batch.endOffset
                contents.validLength = offset
            } catch {
                contents.damage = error
                break
            }
        }
        return contents
    }

    private static func readBatch(_ bytes: [UInt8], at offset: Int, expectedLSN: UInt64) throws(WALDamage) -> WALBatch {
        guard bytes.count - offset >= WALFormat.batchHeaderSize else {
            throw WALDamage(offset: offset, reason: "a truncated batch header (torn write)")
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
                throw WALDamage(offset: offset, reason: "a batch runs past the end of the file (torn write)")
            }
            guard WALFormat.batchChecksum(bytes, at: offset, payloadLength: length) == storedCRC else {
                throw WALDamage(offset: offset, reason: "batch checksum mismatch")
            }
            // From here the bytes are what the writer wrote; a mismatch is a bug or a foreign file.
            guard firstLSN == expectedLSN else {
                throw WALDamage(offset: offset, reason: "batch starts at LSN \(firstLSN), expected \(expectedLSN)")
            }
            guard flags & ~WALFormat.flagLZ4 == 0 else {
                throw WALDamage(offset: offset, reason: "unknown batch flags \(flags)")
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
            guard count <= payload.count / 6 + 1 else {
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
            return WALBatch(firstLSN: firstLSN, records: records, endOffset: end)
        } catch let damage as WALDamage {
            throw damage
        } catch let error as BinaryReader.Error {
            throw WALDamage(offset: offset, reason: "a malformed record in the batch (\(error.reason) at payload byte \(error.offset))")
        } catch {
            throw WALDamage(offset: offset, reason: "an unreadable batch")
        }
    }
}
