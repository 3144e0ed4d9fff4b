import FanoutClient
import FanoutCore
import FanoutServer
import FanoutWire
import FanoutTestSupport
import Testing

/// The whole path over loopback with the real client: register, subscribe, send to a topic and a
/// condition, consume and acknowledge, restart on the same directory.
@Suite("Server: end to end")
struct ServerFlowTests {
    static let android = "token-android-0001"
    static let ios = "token-ios-0001"
    static let web = "token-web-0001"

    @Test func registerSubscribeSendConsumeAcknowledgeRestart() async throws {
        try await TemporaryDirectory.with { directory in
            let fids = try await LoopbackServer.serve(directory: directory) { port, _ in
                let admin = try await LoopbackServer.connect(port)
                var fids: [String: FID] = [:]
                for (token, platform) in [(Self.android, Platform.android), (Self.ios, .ios), (Self.web, .web)] {
                    let result = try await admin.register(RegistrationFields(token: token, platform: platform, appID: "1:1234567890:\(platform):abcdef"))
                    #expect(result.installation.platform == platform)
                    #expect(result.installation.token?.value == token)
                    fids[token] = result.installation.fid
                }
                #expect(try await admin.subscribe([Self.android, Self.ios], to: "news") == [.ok, .ok])
                #expect(try await admin.subscribe([Self.ios, Self.web, "not a token"], to: "sports") == [.ok, .ok, .failed(.invalidArgument)])
                #expect(try await admin.topics(of: Self.ios) == ["news", "sports"])
                #expect(try await admin.subscriberCount(of: "news") == 2)

                // A worker for iOS, a device consumer for the Android installation.
                let worker = try await LoopbackServer.connect(port, key: LoopbackServer.consumerKey, role: .consumer)
                var iosDeliveries = try await worker.attach(.platform(.ios), credit: 10).makeAsyncIterator()
                let device = try await LoopbackServer.connect(port, key: LoopbackServer.consumerKey, role: .consumer)
                var androidDeliveries = try await device.attach(.installations([Self.android]), credit: 10).makeAsyncIterator()

                let condition = try await admin.send(#"{"message":{"condition":"'news' in topics && 'sports' in topics","data":{"kind":"both"}}}"#)
                #expect(condition.audience == 1)
                #expect(condition.enqueued == 1)
                let topic = try await admin.send(#"{"message":{"topic":"news","notification":{"title":"Hello"}}}"#)
                #expect(topic.audience == 2)

                let first = try #require(try await iosDeliveries.next())
                let second = try #require(try await iosDeliveries.next())
                #expect(first.fid == fids[Self.ios])
                #expect(second.fid == fids[Self.ios])
                #expect([first.id.messageSequence, second.id.messageSequence] == [condition.sequence, topic.sequence])
                #expect(String(decoding: first.payload, as: UTF8.self).contains("\"kind\":\"both\""))
                #expect(try await worker.acknowledge([first.id, second.id]) == 2)

                let forAndroid = try #require(try await androidDeliveries.next())
                #expect(forAndroid.fid == fids[Self.android])
                #expect(forAndroid.id.messageSequence == topic.sequence)
                #expect(forAndroid.platform == .android)
                // Not acknowledged: it must wait for the next consumer, across the restart.

                let statistics = try await admin.statistics()
                #expect(statistics.installations == 3)
                #expect(statistics.deliveries.acknowledged == 2)
                #expect(statistics.deliveries.pending == 1)
                #expect(statistics.log.syncs > 0 && statistics.log.records >= statistics.log.syncs)
                try await worker.close()
                try await device.close()
                try await admin.close()
                return fids
            }

            try await LoopbackServer.serve(directory: directory) { port, _ in
                let admin = try await LoopbackServer.connect(port)
                #expect(try await admin.installationCount() == 3)
                #expect(try await admin.topics(of: Self.ios) == ["news", "sports"])
                #expect(try await admin.installation(Self.web).fid == fids[Self.web])
                #expect(try await admin.pendingDeliveries(for: Self.ios).isEmpty)
                let waiting = try await admin.pendingDeliveries(for: Self.android)
                #expect(waiting.count == 1)
                #expect(waiting.first?.isInFlight == false)

                let device = try await LoopbackServer.connect(port, key: LoopbackServer.consumerKey, role: .consumer)
                var deliveries = try await device.attach(.installations([Self.android]), credit: 1).makeAsyncIterator()
                let again = try #require(try await deliveries.next())
                #expect(again.id == waiting.first?.id)
                #expect(try await device.acknowledge([again.id]) == 1)
                #expect(try await admin.pendingDeliveries(for: Self.android).isEmpty)
                try await device.close()
                try await admin.close()
            }
        }
    }

    /// AUDIENCE counts what a topic, a condition and a user reach; SNAPSHOT writes one (for a key
    /// of every project only) that a restart recovers from.
    @Test func audienceAndSnapshot() async throws {
        try await TemporaryDirectory.with { directory in
            try await LoopbackServer.serve(directory: directory) { port, _ in
                let admin = try await LoopbackServer.connect(port)
                for (token, platform) in [(Self.android, Platform.android), (Self.ios, .ios), (Self.web, .web)] {
                    _ = try await admin.register(RegistrationFields(token: token, platform: platform, appID: "1:1:\(platform):a"))
                }
                _ = try await admin.subscribe([Self.android, Self.ios], to: "news")
                _ = try await admin.subscribe([Self.ios, Self.web], to: "sports")
                _ = try await admin.bindDevice(Self.web, to: "alice")
                _ = try await admin.bindDevice(Self.ios, to: "alice")
                #expect(try await admin.audience(.topic("news")) == 2)
                #expect(try await admin.audience(.condition("'news' in topics && 'sports' in topics")) == 1)
                #expect(try await admin.audience(.condition("!('news' in topics)")) == 1)
                #expect(try await admin.audience(.user("alice")) == 2)
                await #expect(throws: FanoutError(.invalidArgument, "", field: "condition")) {
                    _ = try await admin.audience(.condition("'news' in topics &&"))
                }
                let file = try await admin.snapshot()
                #expect(file.hasPrefix("snapshot-") && !file.contains("/"), "the file's name, not the server's path: \(file)")
                let shop = try await LoopbackServer.connect(port, key: LoopbackServer.shopAdminKey)
                await #expect(throws: FanoutError(.permissionDenied, "")) {
                    _ = try await shop.snapshot()
                }
                try await shop.close()
                try await admin.close()
            }
            try await LoopbackServer.serve(directory: directory) { port, engine in
                #expect(engine.recovery?.snapshot != nil, "the restart starts from the snapshot")
                let admin = try await LoopbackServer.connect(port)
                #expect(try await admin.audience(.condition("'news' in topics && 'sports' in topics")) == 1)
                try await admin.close()
            }
        }
    }

    /// A worker takes what has arrived in batches and acknowledges each batch with one ACK.
    @Test func aWorkerTakesAndAcknowledgesInBatches() async throws {
        try await TemporaryDirectory.with { directory in
            try await LoopbackServer.serve(directory: directory) { port, engine in
                let tokens = (0..<300).map { "batch-token-\($0)" }
                try await engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in
                    for token in tokens {
                        try changes.register(RegistrationRequest(token: RegistrationToken(token), platform: .web, appID: AppID("1:1:web:a")!))
                    }
                    _ = try changes.subscribe(tokens.addresses, to: TopicName("all")!)
                }.durable()
                let admin = try await LoopbackServer.connect(port)
                let worker = try await LoopbackServer.connect(port, key: LoopbackServer.consumerKey, role: .consumer)
                let deliveries = try await worker.attach(.platform(.web), credit: 64)
                // GRANT adds at least 1 and keeps the total within the maximum, each refusal saying which.
                do {
                    try await worker.grant(0)
                    Issue.record("GRANT 0 was accepted")
                } catch let error as FanoutError {
                    #expect(error.code == .invalidArgument && error.field == "credit" && error.message.contains("at least 1"), "\(error)")
                }
                do {
                    try await worker.grant(65536)
                    Issue.record("GRANT past the maximum was accepted")
                } catch let error as FanoutError {
                    #expect(error.code == .invalidArgument && error.message.contains("may not pass"), "\(error)")
                }
                #expect(try await admin.send(#"{"message":{"topic":"all","data":{"n":"1"}}}"#).enqueued == 300)
                var seen = Set<DeliveryID>()
                var batches = 0
                while seen.count < 300 {
                    let batch = try await deliveries.nextBatch(maximum: 50)
                    #expect(!batch.isEmpty && batch.count <= 50)
                    seen.formUnion(batch.map(\.id))
                    #expect(try await worker.acknowledge(batch.map(\.id)) == batch.count)
                    batches += 1
                }
                #expect(seen.count == 300)
                #expect(batches < 300, "batches hold more than one delivery")
                #expect(try await admin.statistics().deliveries.pending == 0)
                try await worker.detach()
                #expect(try await deliveries.nextBatch().isEmpty, "the stream ends after DETACH")
                try await worker.close()
                try await admin.close()
            }
        }
    }

    /// Over the wire: a repeated REGISTER is answered as existing (flags bit 1), a taken token with
    /// other details is ALREADY_EXISTS, a rotated token is UNREGISTERED per item, and errors name
    /// fields as the protocol document does.
    @Test func retriesAndFieldNamesOnTheWire() async throws {
        try await TemporaryDirectory.with { directory in
            try await LoopbackServer.serve(directory: directory) { port, _ in
                let admin = try await LoopbackServer.connect(port)
                let fields = RegistrationFields(token: "wire-retry", platform: .ios, appID: "1:1:ios:a", deviceName: "phone")
                let first = try await admin.register(fields)
                let again = try await admin.register(fields)
                #expect(!first.isExisting && again.isExisting && again.installation.fid == first.installation.fid)
                await #expect(throws: FanoutError(.alreadyExists, "", field: "token")) {
                    _ = try await admin.register(RegistrationFields(token: "wire-retry", platform: .android, appID: "1:1:android:a"))
                }
                await #expect(throws: FanoutError(.invalidArgument, "", field: "appId")) {
                    _ = try await admin.register(RegistrationFields(token: "other", platform: .ios, appID: "has a space"))
                }
                await #expect(throws: FanoutError(.invalidArgument, "", field: "apnsToken")) {
                    _ = try await admin.register(RegistrationFields(token: "other", platform: .ios, appID: "1:1:ios:a", apnsToken: "not-hex"))
                }
                await #expect(throws: FanoutError(.invalidArgument, "", field: "deviceOs")) {
                    _ = try await admin.register(RegistrationFields(token: "other", platform: .ios, appID: "1:1:ios:a", deviceOS: "bad\u{7}os"))
                }
                _ = try await admin.refreshToken("wire-retry", to: "wire-rotated")
                #expect(try await admin.subscribe(["wire-retry", "wire-rotated"], to: "news") == [.failed(.unregistered), .ok])
                try await admin.close()
            }
        }
    }

    /// REGISTER_BATCH: each item is checked and applied on its own with REGISTER's rules, the
    /// results come in input order, a refused item changes nothing, and the batch's limits refuse
    /// the whole request before anything is applied. What it registered survives a restart.
    @Test func aBatchRegisterAnswersEachItemOnItsOwnInOrder() async throws {
        try await TemporaryDirectory.with { directory in
            let fid = try await LoopbackServer.serve(directory: directory) { port, _ in
                let admin = try await LoopbackServer.connect(port)
                _ = try await admin.register(RegistrationFields(token: "batch-taken", platform: .ios, appID: "1:1:ios:a"))
                let outcomes = try await admin.register([
                    RegistrationFields(token: "batch-0", platform: .android, appID: "1:1:android:a"),
                    RegistrationFields(token: "batch-taken", platform: .android, appID: "1:1:android:a"),
                    RegistrationFields(token: "batch-2", platform: .web, appID: "has a space"),
                    RegistrationFields(token: "batch-taken", platform: .ios, appID: "1:1:ios:a"),
                    RegistrationFields(token: "batch-0", platform: .android, appID: "1:1:android:a"),
                    RegistrationFields(token: "batch-5", platform: .ios, appID: "1:1:ios:a", apnsToken: "not-hex"),
                    RegistrationFields(offeredFID: "not-a-fid", token: "batch-6", platform: .web, appID: "1:1:web:a"),
                ])
                #expect(outcomes.count == 7)
                guard outcomes.count == 7,
                    case .registered(let first) = outcomes[0], case .registered(let repeated) = outcomes[4],
                    case .registered(let taken) = outcomes[3], case .registered(let assigned) = outcomes[6]
                else {
                    Issue.record("unexpected outcomes \(outcomes)")
                    return ""
                }
                #expect(!first.isExisting && repeated.isExisting && repeated.installation.fid == first.installation.fid, "a later item sees an earlier one")
                #expect(taken.isExisting && taken.installation.platform == .ios)
                #expect(assigned.fidWasAssigned && !assigned.isExisting)
                #expect(outcomes[1] == .failed(FanoutError(.alreadyExists, "", field: "token")))
                #expect(outcomes[2] == .failed(FanoutError(.invalidArgument, "", field: "appId")))
                #expect(outcomes[5] == .failed(FanoutError(.invalidArgument, "", field: "apnsToken")))
                #expect(try await admin.installationCount() == 3)
                await #expect(throws: FanoutError(.invalidArgument, "", field: "registrations")) {
                    _ = try await admin.register([RegistrationFields]())
                }
                let tooMany = (0...1000).map { RegistrationFields(token: "over-\($0)", platform: .web, appID: "1:1:web:a") }
                await #expect(throws: FanoutError(.invalidArgument, "", field: "registrations")) {
                    _ = try await admin.register(tooMany)
                }
                await #expect(throws: FanoutError(.notFound, "", field: "project")) {
                    _ = try await admin.register([RegistrationFields(token: "elsewhere", platform: .web, appID: "1:1:web:a")], in: "no-such-project")
                }
                #expect(try await admin.installationCount() == 3, "a refused batch applies nothing")
                try await admin.close()
                return first.installation.fid.string
            }
            try await LoopbackServer.serve(directory: directory) { port, _ in
                let admin = try await LoopbackServer.connect(port)
                #expect(try await admin.installation("batch-0").fid.string == fid)
                #expect(try await admin.installationCount() == 3)
                try await admin.close()
            }
        }
    }

    /// REGISTER_BATCH_FIDS registers as REGISTER_BATCH does and answers each item with its FID
    /// and flags only: the FID the installation has, whether the server assigned it, whether it
    /// was there already; a refused item's error names its field (a token that is not one too,
    /// though the decoder keeps the batch's valid tokens apart).
    @Test func aBatchRegisterAnsweredWithFIDsGivesEachItemsFIDInOrder() async throws {
        try await TemporaryDirectory.with { directory in
            try await LoopbackServer.serve(directory: directory) { port, _ in
                let admin = try await LoopbackServer.connect(port)
                let taken = try await admin.register(RegistrationFields(token: "fids-taken", platform: .ios, appID: "1:1:ios:a"))
                let offered = "dAAAAAAAAAAAAAAAAAAAAA"
                let receipts = try await admin.registerReturningFIDs([
                    RegistrationFields(token: "fids-0", platform: .android, appID: "1:1:android:a"),
                    RegistrationFields(token: "fids-taken", platform: .android, appID: "1:1:android:a"),
                    RegistrationFields(token: "fids-2", platform: .web, appID: "has a space"),
                    RegistrationFields(token: "fids-taken", platform: .ios, appID: "1:1:ios:a"),
                    RegistrationFields(token: "fids-0", platform: .android, appID: "1:1:android:a"),
                    RegistrationFields(offeredFID: offered, token: "fids-5", platform: .web, appID: "1:1:web:a"),
                    RegistrationFields(offeredFID: "not-a-fid", token: "fids-6", platform: .web, appID: "1:1:web:a"),
                    RegistrationFields(token: "not a token", platform: .web, appID: "1:1:web:a"),
                ])
                #expect(receipts.count == 8)
                guard receipts.count == 8, case .registered(let first, let firstAssigned, let firstExisting) = receipts[0],
                    case .registered(let assigned, true, false) = receipts[6]
                else {
                    Issue.record("unexpected receipts \(receipts)")
                    return
                }
                #expect(firstAssigned && !firstExisting)
                #expect(try await admin.installation("fids-0").fid == first)
                #expect(try await admin.installation("fids-6").fid == assigned)
                #expect(receipts[1] == .failed(FanoutError(.alreadyExists, "", field: "token")))
                #expect(receipts[2] == .failed(FanoutError(.invalidArgument, "", field: "appId")))
                #expect(receipts[3] == .registered(fid: taken.installation.fid, fidWasAssigned: true, isExisting: true))
                #expect(receipts[4] == .registered(fid: first, fidWasAssigned: true, isExisting: true), "a later item sees an earlier one")
                #expect(receipts[5] == .registered(fid: FID(offered)!, fidWasAssigned: false, isExisting: false), "an offered FID is kept")
                #expect(receipts[7] == .failed(FanoutError(.invalidArgument, "", field: "token")), "a token with spaces is not one")
                #expect(try await admin.installationCount() == 4)
                await #expect(throws: FanoutError(.invalidArgument, "", field: "registrations")) {
                    _ = try await admin.registerReturningFIDs([])
                }
                #expect(try await admin.installationCount() == 4)
                try await admin.close()
            }
        }
    }

    /// A request encoded once is sent as often as wanted, each time with a request id of its own,
    /// among other requests in flight: each reply reaches its own caller; an ERROR reply is thrown.
    @Test func anEncodedRequestIsSentAsOftenAsWantedEachTimeWithItsOwnID() async throws {
        try await TemporaryDirectory.with { directory in
            try await LoopbackServer.serve(directory: directory) { port, _ in
                let admin = try await LoopbackServer.connect(port)
                let batch = try EncodedRequest(.registerBatchFIDs(project: "default", [
                    RegistrationFields(token: "encoded-0", platform: .android, appID: "1:1:android:a"),
                    RegistrationFields(token: "encoded-1", platform: .web, appID: "1:1:web:a"),
                ]))
                let first = try await admin.request(batch)
                guard case .registeredFIDs(let receipts) = first, receipts.count == 2,
                    case .registered(let fid0, true, false) = receipts[0], case .registered(let fid1, true, false) = receipts[1]
                else {
                    Issue.record("unexpected reply \(first)")
                    return
                }
                // Again, twice at once and among other requests: each reply is the registrations'.
                async let again = admin.request(batch)
                async let pinged: Void = admin.ping()
                async let twice = admin.request(batch)
                for reply in [try await again, try await twice] {
                    #expect(reply == .registeredFIDs([
                        .registered(fid: fid0, fidWasAssigned: true, isExisting: true), .registered(fid: fid1, fidWasAssigned: true, isExisting: true),
                    ]))
                }
                try await pinged
                #expect(try await admin.installation("encoded-1").fid == fid1)
                let empty = try EncodedRequest(.registerBatchFIDs(project: "default", []))
                await #expect(throws: FanoutError(.invalidArgument, "", field: "registrations")) {
                    _ = try await admin.request(empty)
                }
                #expect(try await admin.installationCount() == 2)
                try await admin.close()
            }
        }
    }

    /// Many requests in flight on one connection at once: every reply reaches its caller.
    @Test func pipelinedRequestsAreMatchedByRequestID() async throws {
        try await TemporaryDirectory.with { directory in
            try await LoopbackServer.serve(directory: directory) { port, _ in
                let client = try await LoopbackServer.connect(port)
                let tokens = (0..<300).map { "pipelined-token-\($0)" }
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for token in tokens {
                        group.addTask {
                            let result = try await client.register(RegistrationFields(token: token, platform: .web, appID: "1:1:web:a"))
                            #expect(result.installation.token?.value == token)
                        }
                    }
                    try await group.waitForAll()
                }
                // Requests on one connection are applied in order: each subscribe sees its register.
                let results = try await withThrowingTaskGroup(of: (Int, [BatchItemResult]).self) { group in
                    for (index, token) in tokens.enumerated() {
                        group.addTask { (index, try await client.subscribe([token], to: "topic-\(index % 7)")) }
                    }
                    var all: [Int: [BatchItemResult]] = [:]
                    for try await (index, result) in group { all[index] = result }
                    return all
                }
                #expect(results.count == tokens.count)
                #expect(results.values.allSatisfy { $0 == [.ok] })
                #expect(try await client.listTopics().map(\.subscribers).reduce(0, +) == 300)
                #expect(try await client.listTopics(after: "topic-3", limit: 2).map(\.topic) == ["topic-4", "topic-5"])
                try await client.close()
            }
        }
    }
}
