import FanoutCore
import FanoutTestSupport
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
}
