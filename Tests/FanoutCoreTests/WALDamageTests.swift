import FanoutCore
import FanoutTestSupport
import Foundation
import Testing

/// The damage matrix: each kind of damage to a data directory, with what start-up does, what
/// `wal verify` (the scan) says, what a repair does, and that the state after the repair is exactly
/// the longest intact prefix of what was acknowledged. Registration `k` is LSN `k`, so the prefix
/// is "registrations 0..<end".
@Suite("WAL damage")
struct WALDamageTests {
    static let registrations = 60

    /// A directory of several segments holding `registrations` acknowledged registrations, one
    /// batch each, and (optionally) snapshots taken after `snapshotsAfter` of them.
    struct Fixture {
        let directory: String
        var segments: [String] {
            (try? FileManager.default.contentsOfDirectory(atPath: self.directory).filter { $0.hasSuffix(".wal") }.sorted()) ?? []
        }

        init(snapshotsAfter: [Int] = [], retention: LogRetention = .sinceNewestSnapshot) throws {
            self.directory = TemporaryDirectory.path("fanout-damage")
            var configuration = EngineConfiguration()
            configuration.logRetention = retention
            let engine = try Engine(directory: self.directory, durability: .always, segmentSize: 1024, configuration: configuration)
            for index in 0..<WALDamageTests.registrations {
                if snapshotsAfter.contains(index) { try engine.snapshot() }
                let request = RegistrationRequest(token: RegistrationToken("token-\(index)"), platform: .android, appID: AppID("app")!)
                _ = try engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in try changes.register(request) }.blockingUntilDurable()
            }
            try engine.close()
        }

        /// A copy of another fixture's directory, as it is now.
        init(copying other: Fixture) throws {
            self.directory = TemporaryDirectory.path("fanout-damage-copy")
            try FileManager.default.copyItem(atPath: other.directory, toPath: self.directory)
        }

        func path(_ name: String) -> String { "\(self.directory)/\(name)" }

        func bytes(_ name: String) throws -> [UInt8] { Array(try Data(contentsOf: URL(fileURLWithPath: self.path(name)))) }

        func write(_ name: String, _ bytes: [UInt8]) throws { try Data(bytes).write(to: URL(fileURLWithPath: self.path(name))) }

        func remove(_ name: String) throws { try FileManager.default.removeItem(atPath: self.path(name)) }

        /// The batches of a segment as written (offsets and LSNs), read before it is damaged.
        func batches(_ name: String) throws -> [WALBatch] { try WALSegmentReader.read(try self.bytes(name)).batches }

        /// Every file's bytes, to check that a dry run changes nothing.
        func everything() throws -> [String: [UInt8]] {
            var files: [String: [UInt8]] = [:]
            for name in try FileManager.default.contentsOfDirectory(atPath: self.directory) where name != "LOCK" {
                var isDirectory: ObjCBool = false
                if FileManager.default.fileExists(atPath: self.path(name), isDirectory: &isDirectory), !isDirectory.boolValue {
                    files[name] = try self.bytes(name)
                }
            }
            return files
        }

        /// Opens the directory and checks that it holds exactly registrations 0..<end.
        func expectPrefix(_ end: Int, _ comment: Comment, sourceLocation: SourceLocation = #_sourceLocation) throws {
            let engine = try Engine(directory: self.directory, durability: .none)
            defer { try? engine.close() }
            #expect(try engine.installationCount() == end, comment, sourceLocation: sourceLocation)
            for index in 0..<WALDamageTests.registrations {
                let present = (try? engine.installation(.token(RegistrationToken("token-\(index)")!))) != nil
                #expect(present == (index < end), "\(comment): registration \(index)", sourceLocation: sourceLocation)
            }
        }

        /// Start-up refuses, naming `mentioning`; verify finds `kind`; a dry run changes nothing and
        /// plans to keep `end`; the repair keeps exactly registrations 0..<end and the directory starts.
        func expectRefusedThenRepaired(
            kind: WALProblem.Kind,
            mentioning: String,
            end: Int,
            _ comment: Comment,
            sourceLocation: SourceLocation = #_sourceLocation
        ) throws {
            if let error = self.startUpError() {
                #expect(error.code == .internal, sourceLocation: sourceLocation)
                #expect(error.message.contains(mentioning), "\(comment): \(error.message)", sourceLocation: sourceLocation)
                #expect(error.message.contains("fanout wal repair"), sourceLocation: sourceLocation)
            } else {
                Issue.record("\(comment): start-up accepted the damage", sourceLocation: sourceLocation)
            }
            let scan = try WALDirectory.examine(self.directory)
            #expect(scan.problems.contains { $0.kind == kind }, "\(comment): \(scan.problems)", sourceLocation: sourceLocation)
            #expect(!scan.allowsStart, sourceLocation: sourceLocation)

            let before = try self.everything()
            let dry = try WALDirectory.repair(self.directory, dryRun: true)
            #expect(try self.everything() == before, "\(comment): a dry run changes nothing", sourceLocation: sourceLocation)
            #expect(dry.plan.endLSN == UInt64(end), "\(comment): the plan keeps \(dry.plan.endLSN)", sourceLocation: sourceLocation)

            let repair = try WALDirectory.repair(self.directory, dryRun: false)
            #expect(!repair.actions.isEmpty, sourceLocation: sourceLocation)
            #expect(try WALDirectory.examine(self.directory).problems.isEmpty, "\(comment): clean after the repair", sourceLocation: sourceLocation)
            // What was dropped is kept aside, not deleted.
            let dropped = repair.plan.droppedSegments.count + (repair.plan.cut == nil ? 0 : 1) + repair.plan.headerRewrites.count
            let quarantined = (try? FileManager.default.contentsOfDirectory(atPath: self.path("quarantine")).count) ?? 0
            #expect(quarantined >= dropped, sourceLocation: sourceLocation)
            try self.expectPrefix(end, comment, sourceLocation: sourceLocation)
        }

        /// Damage start-up deals with itself, losing nothing: verify names `kind` and says start-up
        /// proceeds; a repair of a copy keeps the same prefix and leaves it clean; start-up on the
        /// directory itself keeps registrations 0..<end.
        func expectHandledWithoutLoss(
            kind: WALProblem.Kind,
            end: Int,
            _ comment: Comment,
            sourceLocation: SourceLocation = #_sourceLocation
        ) throws {
            let scan = try WALDirectory.examine(self.directory)
            #expect(scan.problems.map(\.kind).contains(kind), "\(comment): \(scan.problems)", sourceLocation: sourceLocation)
            #expect(scan.allowsStart, sourceLocation: sourceLocation)
            let copy = try Fixture(copying: self)
            defer { copy.delete() }
            let repair = try WALDirectory.repair(copy.directory, dryRun: false, allowingLoss: false)
            #expect(repair.applied && repair.plan.lost == nil && repair.plan.endLSN == UInt64(end), "\(comment): \(repair.actions)", sourceLocation: sourceLocation)
            #expect(try WALDirectory.examine(copy.directory).problems.isEmpty, sourceLocation: sourceLocation)
            try copy.expectPrefix(end, "\(comment), repaired", sourceLocation: sourceLocation)
            try self.expectPrefix(end, "\(comment), at start-up", sourceLocation: sourceLocation)
        }

        /// Why start-up refuses the directory (nil: it starts).
        func startUpError() -> FanoutError? {
            let result = Result { () throws(FanoutError) -> Engine in try Engine(directory: self.directory, durability: .none) }
            switch result {
            case .success(let engine):
                try? engine.close()
                return nil
            case .failure(let error):
                return error
            }
        }

        func delete() { try? FileManager.default.removeItem(atPath: self.directory) }
    }

    @Test func theFixtureSpansSeveralSegments() throws {
        let fixture = try Fixture()
        defer { fixture.delete() }
        #expect(fixture.segments.count >= 5)
        let scan = try WALDirectory.examine(fixture.directory)
        #expect(scan.problems.isEmpty, "\(scan.problems)")
        try fixture.expectPrefix(Self.registrations, "undamaged")
    }

    /// Cut anywhere inside the last two batches: a torn tail, cut at start-up (the bytes kept in
    /// quarantine/), every complete batch kept.
    @Test func truncationAtEveryByteOfTheLastRecords() throws {
        let fixture = try Fixture()
        defer { fixture.delete() }
        let newest = fixture.segments.last!
        let original = try fixture.bytes(newest)
        let batches = try fixture.batches(newest)
        let from = batches[batches.count - 2].offset
        let manifest = try fixture.bytes("MANIFEST")
        for cut in from..<original.count {
            try fixture.write(newest, Array(original[..<cut]))
            let scan = try WALDirectory.examine(fixture.directory)
            #expect(scan.allowsStart && scan.plan().lost == nil, "cut at \(cut): \(scan.problems)")
            let midBatch = !batches.contains { $0.endOffset == cut } && cut != from
            #expect(scan.problems.map(\.kind) == (midBatch ? [.tornTail] : []), "cut at \(cut): \(scan.problems)")
            let engine = try Engine(directory: fixture.directory, durability: .none)
            let kept = batches.filter { $0.endOffset <= cut }.last?.endLSN ?? batches[0].firstLSN
            #expect(try engine.installationCount() == Int(kept), "cut at \(cut)")
            if cut > batches.last(where: { $0.endOffset <= cut })?.endOffset ?? Int.max {
                #expect(engine.recovery?.truncatedTail != nil)
            }
            try engine.close()
            // Back to the original for the next cut (start-up started a new, empty segment).
            for name in fixture.segments where name > newest { try fixture.remove(name) }
            try? FileManager.default.removeItem(atPath: fixture.path("quarantine"))
            try fixture.write("MANIFEST", manifest)
            try fixture.write(newest, original)
        }
        let cutAside = try FileManager.default.contentsOfDirectory(atPath: fixture.directory)
        #expect(!cutAside.contains("quarantine"))
    }

    /// The writer fills a segment with zeros ahead of its batches: what a crash leaves (the
    /// directory copied while the engine runs) is a newest segment of `fillStep` bytes ending in
    /// zeros, which start-up reads as free space: no problem, nothing cut, every registration
    /// there. A close cuts the zeros.
    @Test func theZerosACrashLeavesAfterTheLastBatchAreFreeSpace() throws {
        let directory = TemporaryDirectory.path("fanout-fill")
        let copy = TemporaryDirectory.path("fanout-fill-crash")
        defer {
            try? FileManager.default.removeItem(atPath: directory)
            try? FileManager.default.removeItem(atPath: copy)
        }
        let engine = try Engine(directory: directory, durability: .always)
        for index in 0..<50 {
            let request = RegistrationRequest(token: RegistrationToken("token-\(index)"), platform: .android, appID: AppID("app")!)
            _ = try engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in try changes.register(request) }.blockingUntilDurable()
        }
        try FileManager.default.copyItem(atPath: directory, toPath: copy)
        try engine.close()
        let newest = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".wal") }.sorted().last!
        let crashed = Array(try Data(contentsOf: URL(fileURLWithPath: "\(copy)/\(newest)")))
        let contents = try WALSegmentReader.read(crashed)
        #expect(crashed.count == WALFormat.fillStep && contents.freeBytes == crashed.count - contents.validLength)
        #expect(contents.damage == nil && contents.nextLSN - contents.firstLSN >= 50)
        let closed = Array(try Data(contentsOf: URL(fileURLWithPath: "\(directory)/\(newest)")))
        // (Compared as a Bool: a failed `==` on 4 MiB arrays makes the testing library diff them for minutes.)
        #expect(closed.count == contents.validLength && closed.elementsEqual(crashed[..<contents.validLength]), "a close cuts the zeros")

        let scan = try WALDirectory.examine(copy)
        #expect(scan.problems.isEmpty, "\(scan.problems)")
        let reopened = try Engine(directory: copy, durability: .none)
        defer { try? reopened.close() }
        #expect(reopened.recovery?.truncatedTail == nil)
        #expect(try reopened.installationCount() == 50)
        #expect(!FileManager.default.fileExists(atPath: "\(copy)/quarantine"))
    }

    /// A torn tail is cut and its bytes kept aside; when zeros follow it (the writer fills ahead
    /// of its batches), they are not kept.
    @Test(arguments: [0, 3000])
    func aTornTailsBytesAreKeptAside(zerosAfter: Int) throws {
        let fixture = try Fixture()
        defer { fixture.delete() }
        let newest = fixture.segments.last!
        let original = try fixture.bytes(newest)
        let batches = try fixture.batches(newest)
        try fixture.write(newest, Array(original.dropLast(5)) + [UInt8](repeating: 0, count: zerosAfter))
        try fixture.expectHandledWithoutLoss(kind: .tornTail, end: Self.registrations - 1, "torn tail")
        let kept = try FileManager.default.contentsOfDirectory(atPath: fixture.path("quarantine"))
        let cut = batches[batches.count - 2].endOffset
        #expect(kept.count == 1 && kept[0].hasSuffix("\(newest).from-\(cut)"), "\(kept)")
        var fragment = Array(original[cut..<(original.count - 5)])
        fragment.removeLast(fragment.reversed().prefix { $0 == 0 }.count)  // zeros that end a cut are not kept
        #expect(try fixture.bytes("quarantine/\(kept[0])") == fragment)
    }

    /// A bit flip at the start, middle and end of the newest segment and of an earlier one.
    @Test(arguments: ["newest", "earlier"], ["start", "middle", "end"])
    func bitFlips(segment which: String, place: String) throws {
        let fixture = try Fixture()
        defer { fixture.delete() }
        let segments = fixture.segments
        let name = which == "newest" ? segments.last! : segments[1]
        let batches = try fixture.batches(name)
        #expect(batches.count >= 3)
        let batch = place == "start" ? batches[0] : place == "middle" ? batches[batches.count / 2] : batches[batches.count - 1]
        var bytes = try fixture.bytes(name)
        bytes[(batch.offset + batch.endOffset) / 2] ^= 0x10
        try fixture.write(name, bytes)
        if which == "newest" && place == "end" {
            // Damage with nothing valid after it cannot be told from a torn write: it is cut.
            try fixture.expectHandledWithoutLoss(kind: .tornTail, end: Int(batch.firstLSN), "a flip in the very last batch")
            return
        }
        try fixture.expectRefusedThenRepaired(kind: .corruption, mentioning: name, end: Int(batch.firstLSN), "flip in the \(which) segment's \(place)")
    }

    @Test(arguments: ["first", "middle", "last"])
    func aMissingSegment(_ which: String) throws {
        let fixture = try Fixture()
        defer { fixture.delete() }
        let segments = fixture.segments
        let name = which == "first" ? segments[0] : which == "middle" ? segments[segments.count / 2] : segments.last!
        let first = try fixture.batches(name).first?.firstLSN ?? 0
        try fixture.remove(name)
        let plan = try WALDirectory.repair(fixture.directory, dryRun: true).plan
        #expect(plan.endIsUnknown == (which == "last"), "how many records a missing newest segment held is unknown")
        let end = which == "first" ? 0 : Int(first)
        try fixture.expectRefusedThenRepaired(kind: .segmentMissing, mentioning: name, end: end, "the \(which) segment deleted")
    }

    @Test func aMiddleSegmentCutAtABatchBoundary() throws {
        let fixture = try Fixture()
        defer { fixture.delete() }
        let name = fixture.segments[2]
        let batches = try fixture.batches(name)
        try fixture.write(name, Array(try fixture.bytes(name)[..<batches[1].endOffset]))
        try fixture.expectRefusedThenRepaired(kind: .segmentTruncated, mentioning: name, end: Int(batches[1].endLSN), "a middle segment cut after its second batch")
    }

    /// Each header field damaged, in the newest and in an earlier segment: refused, and a repair
    /// rewrites the header from the file name and the first batch, losing nothing.
    @Test(arguments: [(0, "magic"), (8, "version"), (10, "flags"), (12, "reserved"), (16, "segment index"), (24, "first LSN")], ["newest", "earlier"])
    func aDamagedHeaderField(field: (offset: Int, name: String), segment which: String) throws {
        let fixture = try Fixture()
        defer { fixture.delete() }
        let name = which == "newest" ? fixture.segments.last! : fixture.segments[1]
        var bytes = try fixture.bytes(name)
        bytes[field.offset] ^= 0x04
        try fixture.write(name, bytes)
        try fixture.expectRefusedThenRepaired(kind: .headerDamaged, mentioning: field.name, end: Self.registrations, "\(field.name) of the \(which) segment")
    }

    @Test func garbageAppended() throws {
        // To the newest segment: nothing valid follows, so it is a torn tail, cut at start-up.
        let fixture = try Fixture()
        defer { fixture.delete() }
        let newest = fixture.segments.last!
        try fixture.write(newest, try fixture.bytes(newest) + Array(repeating: 0xA5, count: 100))
        try fixture.expectHandledWithoutLoss(kind: .tornTail, end: Self.registrations, "garbage after the newest segment")

        // To an earlier segment: later segments follow, so it is corruption.
        let other = try Fixture()
        defer { other.delete() }
        let earlier = other.segments[1]
        let end = try other.batches(earlier).last!.endLSN
        try other.write(earlier, try other.bytes(earlier) + Array(repeating: 0xA5, count: 100))
        try other.expectRefusedThenRepaired(kind: .corruption, mentioning: earlier, end: Int(end), "garbage after an earlier segment")
    }

    /// A damaged or extended newest snapshot. Keeping the previous log, the older snapshot and the
    /// log after it hold everything: start-up moves the damaged one aside and starts, verify reports
    /// it. With the default retention the log it covered is gone: start-up refuses, and a repair
    /// falls back to the older snapshot, losing what came after it. With both snapshots damaged,
    /// nothing can be rebuilt.
    @Test(arguments: ["flipped", "extended"])
    func aDamagedSnapshot(_ how: String) throws {
        func damageNewest(_ fixture: Fixture) throws -> String {
            let snapshots = try FileManager.default.contentsOfDirectory(atPath: fixture.directory).filter { $0.hasSuffix(".lz4") }.sorted()
            #expect(snapshots.count == 2)
            var bytes = try fixture.bytes(snapshots[1])
            if how == "flipped" { bytes[bytes.count / 2] ^= 0x01 } else { bytes += [0, 1, 2, 3] }
            try fixture.write(snapshots[1], bytes)
            return snapshots[1]
        }
        let keeping = try Fixture(snapshotsAfter: [20, 40], retention: .sincePreviousSnapshot)
        defer { keeping.delete() }
        let damaged = try damageNewest(keeping)
        #expect(try WALDirectory.examine(keeping.directory).problems.map(\.kind) == [.snapshotDamaged])
        try keeping.expectHandledWithoutLoss(kind: .snapshotDamaged, end: Self.registrations, "a \(how) snapshot with the previous log")
        #expect(try FileManager.default.contentsOfDirectory(atPath: keeping.path("quarantine")).contains { $0.hasSuffix(damaged) })

        let fallback = try Fixture(snapshotsAfter: [20, 40])
        defer { fallback.delete() }
        _ = try damageNewest(fallback)
        try fallback.expectRefusedThenRepaired(kind: .snapshotDamaged, mentioning: "snapshot", end: 20, "a \(how) snapshot, the older one without its log")

        // Both snapshots damaged: the log before the newer one is gone, so nothing can be rebuilt.
        let gone = try Fixture(snapshotsAfter: [20, 40])
        defer { gone.delete() }
        for name in try FileManager.default.contentsOfDirectory(atPath: gone.directory).filter({ $0.hasSuffix(".lz4") }) {
            var bytes = try gone.bytes(name)
            bytes[bytes.count / 2] ^= 0x01
            try gone.write(name, bytes)
        }
        try gone.expectRefusedThenRepaired(kind: .lsnGap, mentioning: "snapshot", end: 0, "both snapshots damaged")
    }

    /// The log ends before the newest snapshot (its later segments deleted, the one before it cut
    /// short): the snapshot is the longest prefix, and the repaired directory starts, again and again.
    @Test func aSnapshotBeyondTheEndOfTheLog() throws {
        let fixture = try Fixture(snapshotsAfter: [20, 40], retention: .sincePreviousSnapshot)
        defer { fixture.delete() }
        var cutName = ""
        for name in fixture.segments {
            let batches = try fixture.batches(name)
            if let first = batches.first, first.firstLSN >= 40 {
                try fixture.remove(name)
            } else if let last = batches.last, last.endLSN == 40 {
                cutName = name
                try fixture.write(name, Array(try fixture.bytes(name)[..<batches[batches.count - 3].endOffset]))
            }
        }
        #expect(!cutName.isEmpty)
        try fixture.expectRefusedThenRepaired(kind: .segmentMissing, mentioning: "missing", end: 40, "the log cut short before the newest snapshot")
        try fixture.expectPrefix(40, "a second start")
        #expect(try WALDirectory.examine(fixture.directory).problems.isEmpty)
    }

    /// What repair drops is what a restart without it would have lost: acknowledged records after
    /// a flip in an earlier segment stay in quarantine/, byte for byte.
    @Test func repairQuarantinesRatherThanDeletes() throws {
        let fixture = try Fixture()
        defer { fixture.delete() }
        let segments = fixture.segments
        let later = try segments[3...].map { ($0, try fixture.bytes($0)) }
        var bytes = try fixture.bytes(segments[2])
        bytes[bytes.count / 2] ^= 0x01
        try fixture.write(segments[2], bytes)
        _ = try WALDirectory.repair(fixture.directory, dryRun: false)
        let kept = try FileManager.default.contentsOfDirectory(atPath: fixture.path("quarantine"))
        for (name, original) in later {
            let copy = try #require(kept.first { $0.hasSuffix("-\(name)") })
            #expect(try fixture.bytes("quarantine/\(copy)") == original)
        }
    }
}
