import FanoutCore
import FanoutTestSupport
import Foundation
import Testing

/// Checked-in segment files (Tests/FanoutCoreTests/Fixtures/wal) with known damage, and what the
/// reader must say about each. `FANOUT_WRITE_FIXTURES=1 swift test --filter WALFixtureTests`
/// regenerates them from `WALFixtureTests.fixtures`; they are never edited by hand.
@Suite("WAL fixtures")
struct WALFixtureTests {
    /// Five batches of three records each, deterministic.
    static var goodSegment: [UInt8] {
        var bytes = WALFormat.segmentHeader(index: 0, firstLSN: 0)
        for batch in 0..<5 {
            let records = (0..<3).map { index -> WALRecord in
                let fid = FID.make(fromRandomBytes: (0..<17).map { UInt8(truncatingIfNeeded: batch * 31 + index * 7 + $0) })
                return .touch(.default, fid: fid, at: Timestamp(millisecondsSinceEpoch: Int64(batch * 3 + index)))
            }
            bytes += WALFormat.batch(records, firstLSN: UInt64(batch * 3))
        }
        return bytes
    }

    static var fixtures: [String: [UInt8]] {
        let good = Self.goodSegment
        var badCRC = good
        badCRC[good.count - 10] ^= 0x10  // inside the last batch's payload
        var badMagic = good
        badMagic[3] = UInt8(ascii: "X")
        var future = good
        future[8] = 9
        return [
            "good.wal": good,
            "torn-tail.wal": Array(good.dropLast(11)),
            "bad-crc.wal": badCRC,
            "bad-magic.wal": badMagic,
            "future-version.wal": future,
        ]
    }

    static func fixture(_ name: String) throws -> [UInt8] {
        let url = try #require(Bundle.module.url(forResource: name, withExtension: nil, subdirectory: "wal"))
        return Array(try Data(contentsOf: url))
    }

    @Test func fixturesAreUpToDate() throws {
        for (name, bytes) in Self.fixtures {
            if ProcessInfo.processInfo.environment["FANOUT_WRITE_FIXTURES"] == "1" {
                let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/wal")
                try Data(bytes).write(to: directory.appendingPathComponent(name))
            } else {
                #expect(try Self.fixture(name) == bytes, "\(name) differs from what the helper produces")
            }
        }
    }

    @Test func goodSegmentReadsCompletely() throws {
        let contents = try WALSegmentReader.read(try Self.fixture("good.wal"))
        #expect(contents.damage == nil)
        #expect(contents.batches.count == 5)
        #expect(contents.nextLSN == 15)
    }

    @Test func tornTailKeepsTheCompleteBatches() throws {
        let contents = try WALSegmentReader.read(try Self.fixture("torn-tail.wal"))
        #expect(contents.batches.count == 4)
        #expect(contents.damage != nil)
        #expect(contents.resumesAt == nil, "nothing valid follows a torn write")
        #expect(contents.highestEndLSN == contents.nextLSN)
    }

    @Test func badCRCStopsAtThatBatch() throws {
        let contents = try WALSegmentReader.read(try Self.fixture("bad-crc.wal"))
        #expect(contents.batches.count == 4)
        #expect(contents.damage?.reason == "batch checksum mismatch")
    }

    /// A damaged magic or version field whose batches still read as this version's is header
    /// damage (a repair rewrites the header); with no batch that reads, the file is refused whole.
    @Test func badMagicAndFutureVersionAreHeaderDamageOrRefused() throws {
        let badMagic = try WALSegmentReader.read(try Self.fixture("bad-magic.wal"))
        #expect(badMagic.headerDamage.map(\.field) == ["magic"])
        #expect(badMagic.batches.count == 5 && badMagic.damage == nil)
        let future = try WALSegmentReader.read(try Self.fixture("future-version.wal"))
        #expect(future.headerDamage.map(\.field) == ["version"])
        #expect(future.batches.count == 5)

        var foreign = try Self.fixture("future-version.wal")
        foreign[WALFormat.segmentHeaderSize + 4] ^= 0xFF  // the first batch no longer checks out
        let damage = #expect(throws: WALDamage.self, "read a segment of a future version") { try WALSegmentReader.read(foreign) }
        #expect(damage?.reason.contains("version 9 is not supported") == true)
        var notASegment = try Self.fixture("bad-magic.wal")
        notASegment[WALFormat.segmentHeaderSize + 4] ^= 0xFF
        #expect(throws: WALDamage.self) { try WALSegmentReader.read(notASegment) }
    }

    /// The engine on a directory whose last segment is cut at a random point: it opens, keeps every
    /// registration whose batch ends before the cut, and nothing after.
    @Test func engineKeepsEverythingBeforeARandomCut() async throws {
        var random = SeededRandomNumberGenerator(seed: 77)
        for trial in 0..<25 {
            let directory = TemporaryDirectory.path("fanout-cut")
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let engine = try Engine(directory: directory, durability: .always)
            for index in 0..<12 {
                try await engine.register(RegistrationRequest(token: RegistrationToken("t\(trial)-\(index)"), platform: .android, appID: AppID("app")!))
            }
            try engine.close()
            let name = try #require(try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".wal") }.sorted().first)
            let path = "\(directory)/\(name)"
            let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
            let ends = try WALSegmentReader.read(bytes).batches.map { ($0.endOffset, $0.count) }
            let cut = Int.random(in: WALFormat.segmentHeaderSize..<bytes.count, using: &random)
            try Data(bytes[..<cut]).write(to: URL(fileURLWithPath: path))

            let reopened = try Engine(directory: directory, durability: .none)
            let kept = ends.filter { $0.0 <= cut }.reduce(0) { $0 + $1.1 }
            #expect(try reopened.installationCount() == kept, "cut at \(cut)")
            for index in 0..<12 {
                let present = (try? reopened.installation(.token(RegistrationToken("t\(trial)-\(index)")!))) != nil
                #expect(present == (index < kept), "registration \(index) with the cut at \(cut)")
            }
            try reopened.close()
        }
    }
}
