import FanoutCore
import FanoutTestSupport
import Foundation
import Synchronization
import Testing

/// A batch of registrations, which looks every item's keys up ahead of registering the first,
/// against the same requests registered one at a time on another engine.
@Suite("Batch registration")
struct BatchRegistrationTests {
    /// Each batch ends as its requests would one at a time, in order: a later item sees what an
    /// earlier one registered (a repeat, a taken token, a taken offered FID), a refused item
    /// changes nothing, and the results match item by item.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func aBatchRegistersAsItsItemsWouldOneAtATime(seed: UInt64) async throws {
        var random = SeededRandomNumberGenerator(seed: seed)
        let offeredFIDs = (0..<12).map { _ in FID.make(fromRandomBytes: random.bytes(17)) }
        let tokens = (0..<40).map { RegistrationToken("batch-\(seed)-token-\($0):APA91b")! }
        let apnsTokens = (0..<4).map { APNsDeviceToken(String(repeating: "a\($0)", count: 16))! }
        func request() -> RegistrationRequest {
            let offered: String? = switch Int.random(in: 0..<10, using: &random) {
            case 0..<4: offeredFIDs.randomElement(using: &random)!.description
            case 4: "not-a-fid"
            default: nil
            }
            return RegistrationRequest(
                offeredFID: offered,
                token: Int.random(in: 0..<8, using: &random) == 0 ? nil : tokens.randomElement(using: &random)!,
                platform: [.android, .ios, .web].randomElement(using: &random)!,
                appID: AppID("1:1:android:a")!,
                apnsToken: Int.random(in: 0..<6, using: &random) == 0 ? apnsTokens.randomElement(using: &random)! : nil
            )
        }

        // An FID the engine chose is random: compared as "assigned", the offered ones by value.
        func shape(_ result: Result<RegistrationResult, FanoutError>) -> String {
            switch result {
            case .success(let registered):
                let i = registered.installation
                let fid = offeredFIDs.contains(i.fid) ? i.fid.description : "assigned"
                return "slot \(i.slot).\(i.generation) \(fid) \(i.token?.value ?? "-") \(i.platform) \(i.apnsToken?.hex ?? "-") assigned:\(registered.fidWasAssigned) existing:\(registered.isExisting)"
            case .failure(let error):
                return "\(error.code) \(error.field ?? "-")"
            }
        }

        // REGISTER_BATCH_FIDS's receipts: the same outcome, the FID and flags only.
        func shape(_ receipt: RegistrationReceipt) -> String {
            switch receipt {
            case .registered(let fid, let assigned, let existing):
                "\(offeredFIDs.contains(fid) ? fid.description : "assigned") assigned:\(assigned) existing:\(existing)"
            case .failed(let error):
                "\(error.code) \(error.field ?? "-")"
            }
        }

        let batched = Engine()
        let oneAtATime = Engine()
        let receipted = Engine()
        var coverage = (repeats: 0, refused: 0, offeredKept: 0)
        for _ in 0..<40 {
            let requests = (0..<Int.random(in: 1...30, using: &random)).map { _ in request() }
            let fromBatch = try await batched.register(requests)
            var expected: [Result<RegistrationResult, FanoutError>] = []
            for request in requests {
                do {
                    expected.append(.success(try await oneAtATime.register(request)))
                } catch {
                    expected.append(.failure(error))
                }
            }
            #expect(fromBatch.map(shape) == expected.map(shape))
            let items = RegistrationItems(requests.map { .success($0) })
            let receipts = try await receipted.apply { (changes: inout Engine.Changes) throws(FanoutError) in
                try changes.registerReturningFIDs(items)
            }.durable()
            #expect(receipts.map(shape) == expected.map { result in
                switch result {
                case .success(let registered): shape(RegistrationReceipt(registered))
                case .failure(let error): shape(RegistrationReceipt.failed(error))
                }
            })
            for result in expected {
                switch result {
                case .success(let registered) where registered.isExisting: coverage.repeats += 1
                case .success(let registered) where !registered.fidWasAssigned: coverage.offeredKept += 1
                case .failure: coverage.refused += 1
                default: break
                }
            }
        }
        #expect(try batched.installationCount() == oneAtATime.installationCount())
        for token in tokens {
            let left = Result { () throws(FanoutError) in try batched.installation(.token(token)) }
            let right = Result { () throws(FanoutError) in try oneAtATime.installation(.token(token)) }
            #expect(shape(left.map { RegistrationResult(installation: $0, fidWasAssigned: false) }) == shape(right.map { RegistrationResult(installation: $0, fidWasAssigned: false) }))
        }
        // The walk reached what the lookups ahead must not get wrong.
        #expect(coverage.repeats >= 5 && coverage.refused >= 20 && coverage.offeredKept >= 5, "\(coverage)")
    }

    /// A batch's records carry its items' fields as they were encoded before the project's lock
    /// (`WALRecord.registerEncoded`): the log holds, byte for byte, the `register` records the
    /// same registrations made one at a time write, refused and repeated items log nothing, and
    /// the log replays to the same installations.
    @Test func aBatchLogsTheRecordsItsItemsWouldOneAtATime() async throws {
        let start = Timestamp(millisecondsSinceEpoch: 1_767_225_600_000)
        let apns = try #require(APNsDeviceToken(String(repeating: "ab", count: 32)))
        let requests: [Result<RegistrationRequest, FanoutError>] = [
            .success(RegistrationRequest(offeredFID: "eWkQ0JhLD2hnwthI-tkvWz", token: RegistrationToken("kept-0:APA91b")!, platform: .android, appID: AppID("1:1:android:a")!)),
            .success(RegistrationRequest(
                offeredFID: "fWkQ0JhLD2hnwthI-tkvWz", token: RegistrationToken("kept-1:APA91b")!, platform: .ios, appID: AppID("1:1:ios:b")!,
                device: try DeviceDetails(name: "Ana's iPhone", os: "iOS 19.1", type: "phone"), apnsToken: apns
            )),
            .failure(FanoutError(.invalidArgument, "refused before the engine", field: "token")),
            // A repeat of the first: nothing new, nothing logged.
            .success(RegistrationRequest(offeredFID: "eWkQ0JhLD2hnwthI-tkvWz", token: RegistrationToken("kept-0:APA91b")!, platform: .android, appID: AppID("1:1:android:a")!)),
            .success(RegistrationRequest(offeredFID: "cWkQ0JhLD2hnwthI-tkvWz", platform: .web, appID: AppID("1:1:web:c")!)),
            // A token another installation holds: refused by the engine, nothing logged.
            .success(RegistrationRequest(token: RegistrationToken("kept-1:APA91b")!, platform: .android, appID: AppID("1:1:android:a")!)),
        ]
        func loggedRecords(_ directory: String) throws -> [WALRecord] {
            let segments = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".wal") }.sorted()
            return try segments.flatMap { name in
                try WALSegmentReader.read(Array(try Data(contentsOf: URL(fileURLWithPath: "\(directory)/\(name)")))).batches.flatMap(\.records)
            }
        }
        try await TemporaryDirectory.with { batchDirectory in
            try await TemporaryDirectory.with { singleDirectory in
                let batched = try Engine(directory: batchDirectory, durability: .none, clock: ManualClock(start))
                let receipts = try await batched.apply { (changes: inout Engine.Changes) throws(FanoutError) in
                    try changes.registerReturningFIDs(RegistrationItems(requests))
                }.durable()
                #expect(receipts.map(\.isRegisteredNew) == [true, true, false, false, true, false])
                try batched.close()

                let single = try Engine(directory: singleDirectory, durability: .none, clock: ManualClock(start))
                for case .success(let request) in requests {
                    _ = try? await single.register(request)
                }
                try single.close()

                let logged = try loggedRecords(batchDirectory)
                #expect(logged.count == 3)
                #expect(logged == (try loggedRecords(singleDirectory)))

                let reopened = try Engine(directory: batchDirectory, durability: .none, clock: ManualClock(start))
                defer { try? reopened.close() }
                let ios = try reopened.installation(.token(RegistrationToken("kept-1:APA91b")!))
                #expect(ios.device == (try DeviceDetails(name: "Ana's iPhone", os: "iOS 19.1", type: "phone")))
                #expect(ios.apnsToken == apns)
                #expect(try reopened.installationCount() == 3)
            }
        }
    }
}

extension BatchRegistrationTests {
    /// A batch's records leave a shard's owner as the log holds them: a replication message of
    /// them decodes to the `register` records of its new installations.
    @Test func aBatchsRecordsReplicateAsTheLogHoldsThem() throws {
        let replicated = Mutex<[WALRecord]>([])
        let log = ReplicatedChangeLog(local: InMemoryChangeLog()) { records, _ throws(FanoutError) in
            let decoded = try WALRecord.decodeBatch(WALRecord.encodeBatch(records))
            replicated.withLock { $0 += decoded }
        }
        let engine = Engine(log: log)
        defer { try? engine.close() }
        for batch in 0..<3 {
            let items = RegistrationItems((0..<50).map { index in
                .success(RegistrationRequest(
                    token: RegistrationToken("replicated-\(batch)-\(index):APA91b")!, platform: index % 2 == 0 ? .android : .web,
                    appID: AppID("1:1:android:\(index % 3)")!
                ))
            })
            let receipts = try engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in
                try changes.registerReturningFIDs(items)
            }.blockingUntilDurable()
            #expect(receipts.allSatisfy { $0.isRegisteredNew })
        }
        let records = replicated.withLock { $0 }
        #expect(records.count == 150)
        for case .register(_, let registration) in records {
            let installation = try engine.installation(.fid(registration.fid))
            #expect(installation.token == registration.token && installation.appID == registration.appID && installation.platform == registration.platform)
        }
    }
}

extension RegistrationReceipt {
    /// Whether the item registered a new installation.
    fileprivate var isRegisteredNew: Bool {
        if case .registered(_, _, isExisting: false) = self { true } else { false }
    }
}
