import FanoutCore
import FanoutTestSupport
import Testing

@Suite("WAL format")
struct WALFormatTests {
    // MARK: - CRC32C

    @Test(arguments: CRC32C.Implementation.available)
    func crc32cMatchesPublishedVectors(_ implementation: CRC32C.Implementation) {
        func crc(_ bytes: [UInt8], continuing crc: UInt32 = 0) -> UInt32 { CRC32C.checksum(bytes, continuing: crc, using: implementation) }
        #expect(crc(Array("123456789".utf8)) == 0xE306_9283)
        #expect(crc([]) == 0)
        // RFC 3720 (iSCSI) B.4.
        #expect(crc([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)
        #expect(crc([UInt8](repeating: 0xFF, count: 32)) == 0x62A8_AB43)
        #expect(crc(Array(0..<32)) == 0x46DD_794E)
        let bytes = Array((0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        for split in [0, 1, 7, 8, 9, 500, 999, 1000] {
            let chained = crc(Array(bytes[split...]), continuing: crc(Array(bytes[..<split])))
            #expect(chained == crc(bytes))
        }
    }

    /// Every implementation this CPU runs gives the tables' CRC, for every length and alignment
    /// of the 8-byte steps and their tails.
    @Test func crc32cImplementationsAgree() {
        var random = SeededRandomNumberGenerator(seed: 32)
        let bytes = random.bytes(600)
        for start in 0..<9 {
            for count in Array(0...80) + [255, 512, 591 - start] {
                let seed = UInt32.random(in: 0...UInt32.max, using: &random)
                bytes.withUnsafeBytes { whole in
                    // Read in place: the steps start `start` bytes past the array's alignment.
                    let slice = UnsafeRawBufferPointer(rebasing: whole[start..<(start + count)])
                    let expected = CRC32C.checksum(slice, continuing: seed, using: .table)
                    for implementation in CRC32C.Implementation.available {
                        #expect(CRC32C.checksum(slice, continuing: seed, using: implementation) == expected, "\(implementation), \(start), \(count)")
                    }
                }
            }
        }
    }

    // MARK: - Records

    static func randomRecord(_ random: inout SeededRandomNumberGenerator) -> WALRecord {
        let project = [ProjectID.default, ProjectID("my-app-1234")!, ProjectID("1065473598624")!].randomElement(using: &random)!
        let fid = FID.make(fromRandomBytes: random.bytes(17))
        let at = Timestamp(millisecondsSinceEpoch: Int64.random(in: 0...2_000_000_000_000, using: &random))
        let token = RegistrationToken("tok\(UInt32.random(in: 0...UInt32.max, using: &random)):APA91b" + String(repeating: "x", count: Int.random(in: 0...200, using: &random)))!
        let user = UserID("user-\(Int.random(in: 0...99, using: &random))")!
        let topic = TopicName("topic-\(Int.random(in: 0...9, using: &random))")!
        func ascendingSlots() -> [UInt32] {
            var slot: UInt32 = 0
            return (0..<Int.random(in: 0...40, using: &random)).map { _ -> UInt32 in
                slot += UInt32.random(in: 1...1000, using: &random)
                return slot
            }
        }
        let body = Array(#"{"message":{"topic":"news","data":{"k":"\#(Int.random(in: 0...999, using: &random))"}}}"#.utf8)
        let sequence = UInt64.random(in: 1...1_000_000, using: &random)
        switch Int.random(in: 0..<27, using: &random) {
        case 17: return .restoreSlotLayout(project, capacity: UInt32.random(in: 0...100_000, using: &random), freeSlots: ascendingSlots().shuffled(using: &random))
        case 18: return .send(project, sequence: sequence, message: Self.randomRenderedMessage(&random, at: at))
        case 23: return .sendBody(project, sequence: sequence, at: at, body: body)
        case 24: return .restoreMessageBody(project, sequence: sequence, at: at, body: body, slots: ascendingSlots(), markerSlots: ascendingSlots())
        case 19:
            // Runs of one sequence, as the engine logs them (sorted), and a lone one.
            let deliveries = ascendingSlots().map { DeliveryID(messageSequence: sequence, slot: $0) } + [DeliveryID(messageSequence: sequence + 1, slot: 7)]
            return .acknowledge(project, deliveries: deliveries)
        case 20: return .expireDeliveries(project, at: at)
        case 21:
            return .restoreMessage(project, sequence: sequence, message: Self.randomRenderedMessage(&random, at: at), slots: ascendingSlots(), markerSlots: ascendingSlots())
        case 22: return .restoreMessageSequence(project, next: sequence)
        case 13: return .restoreUser(project, user: user, anonymous: Bool.random(using: &random), lastActive: at)
        case 14: return .retireFIDs(project, fids: [fid, FID.make(fromRandomBytes: random.bytes(17))])
        case 15: return .retireTokenHashes(project, hashes: (0..<Int.random(in: 0...5, using: &random)).map { _ in random.next() })
        case 16:
            var ordinal: UInt32 = 0
            let ordinals = (0..<Int.random(in: 0...40, using: &random)).map { _ -> UInt32 in
                ordinal += UInt32.random(in: 1...1000, using: &random)
                return ordinal
            }
            return .restoreSubscribers(project, topic: topic, ordinals: ordinals)
        case 0: return .createProject(project)
        case 1: return .deleteProject(project)
        case 2:
            let platform = Platform.allCases.randomElement(using: &random)!
            return .register(
                project,
                .init(
                    fid: fid,
                    token: Bool.random(using: &random) ? token : nil,
                    platform: platform,
                    appID: AppID("1:123:\(platform):abc")!,
                    device: try! DeviceDetails(name: Bool.random(using: &random) ? "Ana's iPhone 🍎" : nil, os: "iOS 19", type: nil),
                    apnsToken: platform == .ios ? APNsDeviceToken(String(repeating: "ab", count: 32)) : nil,
                    at: at
                )
            )
        case 3: return .refreshToken(project, fid: fid, token: token, at: at)
        case 4: return .touch(project, fid: fid, at: at)
        case 5: return .deleteInstallation(project, fid: fid)
        case 6: return .bindDevice(project, fid: fid, user: user, anonymous: Bool.random(using: &random), at: at)
        case 7: return .signOut(project, user: user, fid: fid)
        case 8: return .linkUser(project, anonymous: user, permanent: UserID("permanent")!, at: at)
        case 9: return .cleanUpAnonymousUsers(project, at: at)
        case 10: return .pruneExpiredInstallations(project, at: at)
        case 11: return .subscribeFIDs(project, topic: topic, fids: (0..<Int.random(in: 0...50, using: &random)).map { _ in FID.make(fromRandomBytes: random.bytes(17)) })
        case 25:
            let installations = (0..<Int.random(in: 0...50, using: &random)).map { _ in
                SlotReference(slot: UInt32.random(in: 0...UInt32.max, using: &random), check: UInt16.random(in: 0...UInt16.max, using: &random))
            }
            return .subscribe(project, topic: topic, installations: installations)
        case 26: return .unsubscribe(project, topic: topic, installations: [SlotReference(slot: 7, fid: fid)])
        default: return .unsubscribeFIDs(project, topic: topic, fids: [fid])
        }
    }

    /// A rendered message with a random target of each kind (conditions nested up to 4 deep), each
    /// delivery option given or not, and payloads of random bytes (the log does not parse them).
    static func randomRenderedMessage(_ random: inout SeededRandomNumberGenerator, at: Timestamp) -> RenderedMessage {
        func condition(depth: Int) -> Condition {
            let topic = Condition.topic(TopicName("t\(Int.random(in: 0...9, using: &random))")!)
            guard depth < 4 else { return topic }
            switch Int.random(in: 0..<4, using: &random) {
            case 0: return topic
            case 1: return .not(condition(depth: depth + 1))
            case 2: return .and(condition(depth: depth + 1), condition(depth: depth + 1))
            default: return .or(condition(depth: depth + 1), condition(depth: depth + 1))
            }
        }
        let token = RegistrationToken("tok-\(random.next() % 1000):APA91b")!
        let fid = FID.make(fromRandomBytes: random.bytes(17))
        let target: Message.Target
        switch Int.random(in: 0..<6, using: &random) {
        case 0: target = .token(token)
        case 1: target = .fid(fid)
        case 2: target = .topic(TopicName("news")!)
        case 3: target = .condition(condition(depth: 0))
        case 4: target = .user(UserID("ana")!)
        default: target = .multicast([.token(token), .fid(fid), .token(RegistrationToken("other")!)].shuffled(using: &random))
        }
        func maybe<T>(_ value: T) -> T? { Bool.random(using: &random) ? value : nil }
        var options = Message.DeliveryOptions()
        options.androidPriority = maybe(Bool.random(using: &random) ? .high : .normal)
        options.androidTTLSeconds = maybe(Int64.random(in: 0...2_419_200, using: &random))
        options.androidCollapseKey = maybe("collapse ✓")
        options.apnsPriority = maybe([1, 5, 10].randomElement(using: &random)!)
        options.apnsPushType = maybe("background")
        options.apnsExpiration = maybe(UInt64.random(in: 0...2_000_000_000, using: &random))
        options.apnsCollapseID = maybe("apns-collapse")
        options.webpushTTLSeconds = maybe(UInt32.random(in: 0...100_000, using: &random))
        options.webpushTopic = maybe("web-topic")
        return RenderedMessage(
            target: target,
            options: options,
            acceptedAt: at,
            apnsBody: random.bytes(Int.random(in: 0...300, using: &random)),
            androidPayload: random.bytes(Int.random(in: 0...300, using: &random)),
            webpushPayload: random.bytes(Int.random(in: 0...300, using: &random))
        )
    }

    static func randomBatches(_ random: inout SeededRandomNumberGenerator, count: Int) -> [[WALRecord]] {
        (0..<count).map { _ in (0..<Int.random(in: 1...20, using: &random)).map { _ in Self.randomRecord(&random) } }
    }

    /// A segment file holding `batches`, numbered from LSN 100.
    static func segment(_ batches: [[WALRecord]]) -> (bytes: [UInt8], ends: [Int]) {
        var bytes = WALFormat.segmentHeader(index: 3, firstLSN: 100)
        var ends: [Int] = []
        var lsn: UInt64 = 100
        for records in batches {
            bytes += WALFormat.batch(records, firstLSN: lsn)
            lsn += UInt64(records.count)
            ends.append(bytes.count)
        }
        return (bytes, ends)
    }

    @Test(arguments: [1, 2, 3] as [UInt64])
    func recordsAndBatchesRoundTrip(seed: UInt64) throws {
        var random = SeededRandomNumberGenerator(seed: seed)
        let batches = Self.randomBatches(&random, count: 40)
        let (bytes, _) = Self.segment(batches)
        let contents = try WALSegmentReader.read(bytes)
        #expect(contents.damage == nil)
        #expect(contents.index == 3)
        #expect(contents.batches.map(\.records) == batches)
        #expect(contents.validLength == bytes.count)
        #expect(contents.nextLSN == 100 + UInt64(batches.joined().count))
    }

    @Test func largeRepetitiveBatchesAreCompressed() throws {
        let fid = FID("eWkQ0JhLD2hnwthI-tkvWz")!
        let records = (0..<1000).map { WALRecord.touch(.default, fid: fid, at: Timestamp(millisecondsSinceEpoch: Int64($0))) }
        let batch = WALFormat.batch(records, firstLSN: 0)
        #expect(batch[20] == 1, "the LZ4 flag is set")
        let uncompressed = Int(batch[24]) | Int(batch[25]) << 8 | Int(batch[26]) << 16 | Int(batch[27]) << 24
        #expect(uncompressed == 1000 * 42, "each record is u32 length + 38 bytes")
        #expect(batch.count * 4 < uncompressed)
        let contents = try WALSegmentReader.read(WALFormat.segmentHeader(index: 0, firstLSN: 0) + batch)
        #expect(contents.batches.first?.records == records)
    }

    /// The log writer's encoder, reused from batch to batch (growing and shrinking; small,
    /// compressed, and too random to compress), frames each batch exactly as records encoded one by
    /// one and framed afresh.
    @Test func aReusedEncoderFramesWhatAFreshFramingDoes() throws {
        var random = SeededRandomNumberGenerator(seed: 12)
        var encoder = WALFormat.BatchEncoder()
        let fid = FID("eWkQ0JhLD2hnwthI-tkvWz")!
        var batches: [[WALRecord]] = [1, 300, 2, 1000, 40, 1, 700].map { size in
            (0..<size).map { index in
                index % 3 == 0 ? Self.randomRecord(&random) : .touch(.default, fid: fid, at: Timestamp(millisecondsSinceEpoch: Int64(index)))
            }
        }
        let incompressible = WALRecord.sendBody(.default, sequence: 1, at: Timestamp(millisecondsSinceEpoch: 0), body: random.bytes(8000))
        batches.insert([incompressible], at: 4)
        for (lsn, records) in batches.enumerated() {
            let framed = encoder.batch(records, firstLSN: UInt64(lsn))
            #expect(framed == WALFormat.batch(rawRecords: records.map(WALFormat.encode), firstLSN: UInt64(lsn)), "\(records.count) records")
            let contents = try WALSegmentReader.read(WALFormat.segmentHeader(index: 0, firstLSN: UInt64(lsn)) + framed)
            #expect(contents.batches.first?.records == records)
            let uncompressed = records.map { WALFormat.encode($0).count + 4 }.reduce(0, +)
            let compressible = lsn != 4 && uncompressed > WALFormat.compressionThreshold
            #expect(framed[20] == (compressible ? 1 : 0), "compressed when large and compressible")
            #expect(compressible ? framed.count < uncompressed : framed.count == WALFormat.batchHeaderSize + uncompressed)
        }
        // The log writer's form: several appends' arrays, framed as one batch of all their records.
        let appends = Array(batches.prefix(4)) + [[]] + [batches[5]]
        let joined = appends.flatMap { $0 }
        let framed = encoder.batch(appends: appends, firstLSN: 77)
        #expect(framed == WALFormat.batch(rawRecords: joined.map(WALFormat.encode), firstLSN: 77))
        #expect(try WALSegmentReader.read(WALFormat.segmentHeader(index: 0, firstLSN: 77) + framed).batches.first?.records == joined)
    }

    // MARK: - Damage

    /// Cutting the file anywhere keeps exactly the batches that end before the cut.
    /// Zeros after the last batch, whatever their length, are free space (the writer fills ahead
    /// of its batches); a byte other than zero anywhere in them makes them damage again.
    @Test func zerosAfterTheLastBatchAreFreeSpace() throws {
        var random = SeededRandomNumberGenerator(seed: 21)
        let batches = Self.randomBatches(&random, count: 5)
        let (bytes, ends) = Self.segment(batches)
        for zeros in [1, 27, 28, 29, 5000] {
            let contents = try WALSegmentReader.read(bytes + [UInt8](repeating: 0, count: zeros))
            #expect(contents.damage == nil, "\(zeros) zeros")
            #expect(contents.batches.map(\.records) == batches)
            #expect(contents.validLength == bytes.count && contents.freeBytes == zeros)
            var dirty = bytes + [UInt8](repeating: 0, count: zeros)
            dirty[dirty.count - 1] = 1
            let damaged = try WALSegmentReader.read(dirty)
            #expect(damaged.damage?.offset == ends.last && damaged.freeBytes == 0, "\(zeros) zeros, the last not")
            #expect(damaged.batches.count == batches.count)
        }
        let empty = try WALSegmentReader.read(WALFormat.segmentHeader(index: 0, firstLSN: 7) + [UInt8](repeating: 0, count: 4096))
        #expect(empty.damage == nil && empty.batches.isEmpty && empty.nextLSN == 7 && empty.freeBytes == 4096)
    }

    @Test func everyTruncationKeepsTheCompleteBatchesOnly() throws {
        var random = SeededRandomNumberGenerator(seed: 9)
        let batches = Self.randomBatches(&random, count: 6)
        let (bytes, ends) = Self.segment(batches)
        for cut in WALFormat.segmentHeaderSize...bytes.count {
            let contents = try WALSegmentReader.read(Array(bytes[..<cut]))
            let complete = ends.filter { $0 <= cut }.count
            #expect(contents.batches.count == complete, "cut at \(cut)")
            #expect(contents.batches.map(\.records) == Array(batches.prefix(complete)))
            #expect(contents.validLength == (complete == 0 ? WALFormat.segmentHeaderSize : ends[complete - 1]))
            #expect((contents.damage == nil) == (cut == contents.validLength))
        }
    }

    /// A flipped bit anywhere after the header is caught at or before its batch; nothing after the
    /// damage is returned, and nothing before it is lost.
    @Test(arguments: [11, 12] as [UInt64])
    func bitFlipsAreCaughtByTheChecksum(seed: UInt64) throws {
        var random = SeededRandomNumberGenerator(seed: seed)
        let batches = Self.randomBatches(&random, count: 8)
        let (bytes, ends) = Self.segment(batches)
        for _ in 0..<400 {
            var damaged = bytes
            let position = Int.random(in: WALFormat.segmentHeaderSize..<bytes.count, using: &random)
            damaged[position] ^= UInt8(1) << UInt8.random(in: 0...7, using: &random)
            let contents = try WALSegmentReader.read(damaged)
            let damagedBatch = ends.firstIndex { position < $0 }!
            #expect(contents.damage != nil)
            #expect(contents.batches.count == damagedBatch, "flip at \(position)")
            #expect(contents.batches.map(\.records) == Array(batches.prefix(damagedBatch)))
        }
    }

    @Test func badHeadersRefuseTheWholeSegment() {
        let good = WALFormat.segmentHeader(index: 0, firstLSN: 0)
        var badMagic = good
        badMagic[0] = UInt8(ascii: "X")
        var future = good
        future[8] = 2
        for (bytes, reason) in [(badMagic, "bad magic"), (future, "version 2"), (Array(good.prefix(20)), "truncated")] {
            do {
                _ = try WALSegmentReader.read(bytes)
                Issue.record("accepted a segment with \(reason)")
            } catch {
                #expect(error.offset <= 8)
                #expect(error.reason.contains(reason))
            }
        }
    }

    @Test func hostileLengthsAreRefusedWithoutAllocating() throws {
        var bytes = WALFormat.segmentHeader(index: 0, firstLSN: 0) + WALFormat.batch([.createProject(.default)], firstLSN: 0)
        // Claim a 4 GiB payload.
        for index in 32..<36 { bytes[index] = 0xFF }
        let contents = try WALSegmentReader.read(bytes)
        #expect(contents.batches.isEmpty)
        #expect(contents.damage?.reason.contains("limit") == true)
    }

    /// Garbage behind a valid checksum: batches whose payload is random bytes, or a real record
    /// with random bytes changed, framed with a correct CRC. The reader must never crash, and must
    /// either decode records that re-encode to the same bytes or report damage.
    @Test(arguments: [51, 52] as [UInt64])
    func validlyFramedGarbageNeverCrashes(seed: UInt64) throws {
        var random = SeededRandomNumberGenerator(seed: seed)
        for _ in 0..<3000 {
            var record = WALFormat.encode(Self.randomRecord(&random))
            if Bool.random(using: &random) {
                record = random.bytes(Int.random(in: 0...64, using: &random))
            } else {
                for _ in 0..<Int.random(in: 1...4, using: &random) where !record.isEmpty {
                    record[Int.random(in: 0..<record.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
                }
            }
            let bytes = WALFormat.segmentHeader(index: 0, firstLSN: 0) + WALFormat.batch(rawRecords: [record], firstLSN: 0)
            let contents = try WALSegmentReader.read(bytes)
            if let decoded = contents.batches.first?.records.first {
                #expect(WALFormat.encode(decoded) == record, "a decoded record re-encodes to its bytes")
            } else {
                #expect(contents.damage != nil)
            }
        }
    }
}

