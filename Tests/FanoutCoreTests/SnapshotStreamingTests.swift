@testable import FanoutCore
import FanoutTestSupport
import Foundation
import Testing

/// Recovery expands a snapshot a piece at a time on a thread of its own while the caller applies
/// the records: the pieces, the hand-off, and records that straddle pieces.
@Suite("Snapshot streaming")
struct SnapshotStreamingTests {
    static func frame(of content: [UInt8]) throws -> [UInt8] {
        var pieces = stride(from: 0, to: content.count, by: 300_000).map { Array(content[$0..<min($0 + 300_000, content.count)]) }
        var frame: [UInt8] = []
        try LZ4Frame.compress({ pieces.isEmpty ? nil : pieces.removeFirst() }, into: { frame += $0 })
        return frame
    }

    @Test func theDecompressorHandsOverTheContentInPiecesAndChecksTheEnd() throws {
        var random = SeededRandomNumberGenerator(seed: 7)
        // Incompressible and repetitive stretches, 3.5 MiB in all.
        let content = (0..<(7 << 19)).map { $0 % 3000 < 1500 ? UInt8.random(in: 0...255, using: &random) : UInt8(truncatingIfNeeded: $0 / 97) }
        let frame = try Self.frame(of: content)
        let decompressor = try LZ4Frame.Decompressor(frame, limit: content.count)
        var pieces: [ArraySlice<UInt8>] = []
        while let piece = try decompressor.next() { pieces.append(piece) }
        #expect(pieces.count >= 4 && pieces.allSatisfy { $0.count <= 1 << 20 })
        #expect(Array(pieces.joined()) == content)

        // A frame cut short never reaches its end; one expanding past the limit is refused.
        for (damaged, limit) in [(Array(frame.dropLast(4)), content.count), (frame, content.count - 1)] {
            #expect(throws: LZ4Frame.Error.self) {
                let decompressor = try LZ4Frame.Decompressor(damaged, limit: limit)
                while try decompressor.next() != nil {}
            }
        }
    }

    /// A snapshot file is read a MiB at a time as it is expanded, not whole: the same content,
    /// and a file cut short, one with bytes after its frame, and an empty one are each refused.
    @Test func aFilesFrameIsReadInPiecesAndChecksItsEnd() async throws {
        try await TemporaryDirectory.with { directory in
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            var random = SeededRandomNumberGenerator(seed: 8)
            let content = (0..<(7 << 19)).map { $0 % 3000 < 2000 ? UInt8.random(in: 0...255, using: &random) : UInt8(truncatingIfNeeded: $0 / 97) }
            let frame = try Self.frame(of: content)
            #expect(frame.count > 2 << 20, "the file spans several reads")
            func expand(_ bytes: [UInt8]) throws -> [UInt8] {
                let path = directory + "/frame.lz4"
                try Data(bytes).write(to: URL(fileURLWithPath: path))
                let decompressor = try LZ4Frame.Decompressor(reading: path, limit: content.count)
                var expanded: [UInt8] = []
                while let piece = try decompressor.next() { expanded += piece }
                return expanded
            }
            #expect(try expand(frame) == content)
            for damaged in [Array(frame.dropLast(4)), frame + [0], [], Array(frame.prefix(1 << 20))] {
                #expect(throws: LZ4Frame.Error.self, "\(damaged.count) bytes") { _ = try expand(damaged) }
            }
        }
    }

    @Test func theProducerThreadHandsOverInOrderThenItsError() throws {
        struct Stop: Error {}
        let producer = ProducerThread<Int, Stop>(capacity: 3) { emit throws(Stop) in
            for value in 0..<100 { guard emit(value) else { return } }
            throw Stop()
        }
        var received: [Int] = []
        #expect(throws: Stop.self) { while let value = try producer.next() { received.append(value) } }
        #expect(received == Array(0..<100))

        // A consumer that stops early releases a producer blocked on a full buffer.
        let endless = ProducerThread<Int, Never>(capacity: 2) { emit in
            var value = 0
            while emit(value) { value += 1 }
        }
        #expect(try endless.next() == 0)
        endless.stop()
    }

    /// 12k installations with 163-byte tokens make a snapshot of several MiB: records straddle the
    /// 1 MiB pieces, and one topic's record (48 KB of slots) is larger than many pieces' leftovers.
    @Test func aSnapshotLargerThanOnePieceRestoresEverything() async throws {
        try await TemporaryDirectory.with { directory in
            let count = 12_000
            func token(_ index: Int) -> String { "\(index):APA91b" + String(repeating: "x", count: 163 - 7 - String(index).count) }
            let engine = try Engine(directory: directory, durability: .none)
            for index in 0..<count {
                try await engine.register(RegistrationRequest(token: RegistrationToken(token(index))!, platform: .android, appID: AppID("1:1:android:a")!))
            }
            for topic in 0..<3 {
                for start in stride(from: topic, to: count, by: 1000) {
                    _ = try await engine.subscribe((start..<min(start + 1000, count)).filter { $0 % 3 != topic }.map(token).addresses, to: TopicName("t\(topic)")!)
                }
            }
            let expected = try (0..<3).map { try engine.subscriberCount(of: TopicName("t\($0)")!) }
            let path = try engine.snapshot()
            try engine.close()
            let decompressor = try LZ4Frame.Decompressor(Array(Data(contentsOf: URL(fileURLWithPath: path))), limit: 1 << 30)
            var contentSize = 0
            while let piece = try decompressor.next() { contentSize += piece.count }
            #expect(contentSize > 2 << 20, "the content spans several pieces")

            let reopened = try Engine(directory: directory, durability: .none)
            #expect(reopened.recovery?.snapshot?.file == path)
            #expect(try reopened.installationCount() == count)
            #expect(try (0..<3).map { try reopened.subscriberCount(of: TopicName("t\($0)")!) } == expected)
            #expect(try reopened.installation(.token(RegistrationToken(token(count - 1))!)).platform == .android)
            try reopened.close()
        }
    }

    /// A project's snapshot records are made one at a time as the file is written
    /// (`SnapshotRecords`), their number counted ahead for the header without making them. Over a
    /// state with every kind of record (credentials, touches, users and their devices, topics,
    /// tombstones, pending messages and a deleted-messages marker): the count is the number made,
    /// and the records restore the project exactly (its snapshot after a restart has the same
    /// records, slots included).
    @Test(arguments: [1, 2] as [UInt64])
    func aProjectsRecordsAreCountedAheadAndRestoreItExactly(seed: UInt64) async throws {
        try await TemporaryDirectory.with { directory in
            var random = SeededRandomNumberGenerator(seed: seed)
            let clock = ManualClock()
            var configuration = EngineConfiguration()
            configuration.sendQuota = .unlimited
            let engine = try Engine(directory: directory, durability: .none, configuration: configuration, clock: clock)
            try await engine.setLegacyInstanceIDs(seed == 1)
            _ = try await engine.setAnonymousCleanUp(seed == 2)
            var fids: [FID] = []
            for index in 0..<300 {
                let token = Int.random(in: 0..<10, using: &random) == 0 ? nil : RegistrationToken("snap-\(seed)-\(index):APA91b")!
                let platform: Platform = [.android, .ios, .web][index % 3]
                let result = try await engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in
                    let request = RegistrationRequest(token: token, platform: platform, appID: AppID("1:1:\(platform):a")!)
                    return index % 7 == 0
                        ? try changes.register(request, creatingOnly: false) { _ in (0..<32).map { UInt8(truncatingIfNeeded: index + $0) } }
                        : try changes.register(request)
                }.durable()
                fids.append(result.installation.fid)
                clock.advance(by: .seconds(1))
                if index % 5 == 0 { _ = try await engine.touch(.fid(result.installation.fid)) }
                if index % 11 == 0 { _ = try await engine.bindDevice(.fid(result.installation.fid), to: UserID("user-\(index % 4)")!, anonymous: index % 2 == 0) }
            }
            for topic in 0..<5 {
                _ = try await engine.subscribe(fids.filter { _ in Bool.random(using: &random) }.map { .fid($0) }, to: TopicName("topic-\(topic)")!)
            }
            for fid in fids.prefix(40) where Int.random(in: 0..<3, using: &random) == 0 { _ = try await engine.deleteInstallation(fid) }
            for _ in 0..<5 { _ = try await engine.send(Array(#"{"message":{"topic":"topic-0","data":{"k":"v"}}}"#.utf8)) }
            // Past 100 pending, an installation's deliveries give way to a deleted-messages marker.
            _ = try await engine.subscribe(fids.suffix(3).map { .fid($0) }, to: TopicName("few")!)
            for _ in 0..<102 { _ = try await engine.send(Array(#"{"message":{"topic":"few","data":{"k":"v"}}}"#.utf8)) }

            func records(of engine: Engine) throws -> (count: Int, records: [WALRecord]) {
                try engine.withProject(.default) { state in
                    var cursor = SnapshotRecords(state)
                    var records: [WALRecord] = []
                    while let record = cursor.next() { records.append(record) }
                    return (cursor.count, records)
                }
            }
            let before = try records(of: engine)
            #expect(before.count == before.records.count)
            let kinds = Set(before.records.map { "\($0)".prefix(while: { $0 != "(" }) })
            #expect(kinds.isSuperset(of: ["restoreSlotLayout", "register", "touch", "setCredential", "restoreUserCreated", "bindDevice", "restoreSubscribers", "retireFIDs", "restoreMessage", "restoreMessageSequence"]), "\(kinds.sorted())")
            #expect(before.records.contains { if case .restoreMessage(_, _, _, _, let markers) = $0 { !markers.isEmpty } else { false } }, "a marker")
            try engine.snapshot()
            try engine.close()
            let reopened = try Engine(directory: directory, durability: .none, configuration: configuration, clock: clock)
            #expect(reopened.recovery?.snapshot != nil)
            #expect(try records(of: reopened).records == before.records)
            try reopened.close()
        }
    }
}
