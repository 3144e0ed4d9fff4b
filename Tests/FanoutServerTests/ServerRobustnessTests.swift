import FanoutClient
import FanoutCore
import FanoutServer
import FanoutTestSupport
import FanoutWire
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Testing

/// Bad input, silent and stuck peers, and shutdown (docs/wire-protocol.md section 7): each ends
/// as documented and the server keeps serving everyone else.
/// Serialized: the idle and stall tests measure time, and the pipelined bursts of the shutdown and
/// half-close tests, run beside them on two cores, could delay a keep-alive past its timeout.
@Suite("Server: bad input, timeouts, shutdown", .serialized)
struct ServerRobustnessTests {
    @Test func malformedFramesEndInAnErrorFrameAndAClosedConnection() async throws {
        try await TemporaryDirectory.with { directory in
            // The default idle timeout (60 s): a case the server waited on would end in GOAWAY and
            // fail, not hang; a shorter one could close a connection this test is slow to write on
            // when the machine is busy.
            try await LoopbackServer.serve(directory: directory) { port, _ in
                var samples = WireSamples(seed: 11)
                var random = SeededRandomNumberGenerator(seed: 12)
                var cases = 0
                while cases < 40 {
                    var valid = ByteBuffer()
                    try ClientFrame(requestID: 5, request: samples.request()).encode(into: &valid)
                    let mutated = FrameFuzz.mutate(Array(valid.readableBytesView), using: &random)
                    // Only frames the decoder refuses (a mutation may leave a valid frame, or a short one).
                    guard FrameFuzz.feed(mutated, as: ClientRequest.self, maximumPayloadSize: FrameHeader.defaultMaximumPayloadSize) == .protocolError,
                        mutated.count >= 12, mutated[1] != Opcode.hello.rawValue
                    else { continue }
                    cases += 1
                    let raw = try await RawConnection.open(port)
                    let frames = try await raw.exchange([try RawConnection.hello(), ByteBuffer(bytes: mutated)])
                    #expect(frames.count == 2, "\(frames)")
                    #expect(frames.first?.message.opcode == Opcode.hello.reply)
                    guard case .error(let error) = frames.last?.message else {
                        Issue.record("expected an error frame, got \(frames)")
                        continue
                    }
                    #expect([.invalidArgument, .resourceExhausted].contains(error.code))
                }
                // Meanwhile and afterwards, a well-behaved client is served.
                let client = try await LoopbackServer.connect(port)
                #expect(try await client.installationCount() == 0)
                try await client.close()
            }
        }
    }

    @Test func anOversizedFrameIsRefusedWithoutReadingIt() async throws {
        try await TemporaryDirectory.with { directory in
            try await LoopbackServer.serve(directory: directory, configuration: ServerConfiguration(maximumPayloadSize: 4096, idleTimeout: .seconds(900))) { port, _ in
                var header = ByteBuffer()
                header.writeMultipleIntegers(FrameHeader.currentVersion, Opcode.send.rawValue, UInt16(0), UInt32(77), UInt32(1 << 30))
                let raw = try await RawConnection.open(port)
                let frames = try await raw.exchange([try RawConnection.hello(), header])
                #expect(frames.count == 2)
                guard case .error(let error) = frames.last?.message else {
                    Issue.record("expected an error frame, got \(frames)")
                    return
                }
                #expect(error.code == .resourceExhausted)
                #expect(frames.last?.requestID == 77)
            }
        }
    }

    @Test func aSilentConnectionGetsGoAwayAndIsClosed() async throws {
        try await TemporaryDirectory.with { directory in
            try await LoopbackServer.serve(directory: directory, configuration: ServerConfiguration(idleTimeout: .milliseconds(300))) { port, _ in
                // Not even a HELLO.
                let raw = try await RawConnection.open(port)
                let frames = try await raw.exchange([])
                #expect(frames.map(\.message) == [.goAway(.unavailable, "idle timeout")])
            }
            // The client's keep-alive PINGs (every third of the timeout) keep its connection open
            // across a silence from the caller longer than the timeout.
            try await LoopbackServer.serve(directory: directory, configuration: ServerConfiguration(idleTimeout: .seconds(2))) { port, _ in
                let client = try await LoopbackServer.connect(port)
                try await ContinuousClock().sleep(for: .milliseconds(2500))
                try await client.ping()
                try await client.close()
            }
        }
    }

    /// A consumer that stops reading: the server's output for it fills, stays above the
    /// high-water mark for the stall timeout, and the connection is closed; what it held is
    /// pending again.
    @Test func aConsumerThatDoesNotReadIsDisconnected() async throws {
        try await TemporaryDirectory.with { directory in
            let configuration = ServerConfiguration(idleTimeout: .seconds(900), writeBufferHighWaterMark: 16 * 1024, stallTimeout: .milliseconds(200))
            try await LoopbackServer.serve(directory: directory, configuration: configuration) { port, engine in
                let tokens = (0..<10_000).map { "stall-\($0)" }
                try await engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in
                    for token in tokens {
                        try changes.register(RegistrationRequest(token: RegistrationToken(token), platform: .android, appID: AppID("1:1:android:a")!))
                    }
                    for batch in stride(from: 0, to: tokens.count, by: 1000) {
                        _ = try changes.subscribe((Array(tokens[batch..<(batch + 1000)])).addresses, to: TopicName("big")!)
                    }
                }.durable()
                // A consumer socket that never reads.
                let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                    .channelOption(.autoRead, value: false)
                    .connect(host: "127.0.0.1", port: port).get()
                var attach = ByteBuffer()
                try ClientFrame(requestID: 1, request: .hello(Hello(role: .consumer, credential: .apiKey(Array(LoopbackServer.consumerKey.utf8))))).encode(into: &attach)
                try ClientFrame(requestID: 2, request: .attach(project: "default", scope: .platform(.android), credit: 65_536)).encode(into: &attach)
                try await channel.writeAndFlush(attach)
                while try engine.deliveryStatistics().consumers == 0 { await Task.yield() }

                let value = String(repeating: "x", count: 2000)  // 10000 deliveries of 2 KB: more than the sockets buffer
                _ = try await engine.send(Array(#"{"message":{"topic":"big","data":{"v":"\#(value)"}}}"#.utf8))
                // Wait (bounded) for the server to give up on it: no consumer, nothing in flight.
                let deadline = ContinuousClock.now + .seconds(60)
                while try engine.deliveryStatistics().consumers > 0, ContinuousClock.now < deadline {
                    try await ContinuousClock().sleep(for: .milliseconds(20))
                }
                let statistics = try engine.deliveryStatistics()
                #expect(statistics.consumers == 0)
                #expect(statistics.pending == 10_000)
                #expect(try engine.pendingDeliveries(for: .token(RegistrationToken("stall-0")!)).allSatisfy { !$0.isInFlight })
                try? await channel.close()
            }
        }
    }

    @Test func gracefulShutdownSaysGoAwayAfterTheRepliesOfWhatItApplied() async throws {
        try await TemporaryDirectory.with { directory in
            let engine = try Engine(directory: directory)
            defer { try? engine.close() }
            let (server, group) = try await Self.serverInAServiceGroup(engine)
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                let client = try await LoopbackServer.connect(server.localPort)
                _ = try await client.register(RegistrationFields(token: "before-shutdown", platform: .web, appID: "1:1:web:a"))
                await group.triggerGracefulShutdown()
                try await tasks.next()  // the group returns: the server closed every connection
                await #expect(throws: FanoutError.self) {
                    _ = try await client.installationCount()
                }
                try? await client.close()
            }
            #expect(try engine.installation(.token(RegistrationToken("before-shutdown")!)).platform == .web)
        }
    }

    /// `count` REGISTER frames with request ids 2, 3, ... (after a HELLO with id 1), in one buffer.
    static func pipelinedRegistrations(_ count: Int, prefix: String) throws -> ByteBuffer {
        var buffer = try RawConnection.hello()
        for index in 0..<count {
            let fields = RegistrationFields(token: "\(prefix)-\(index)", platform: .android, appID: "1:1:android:a")
            try ClientFrame(requestID: UInt32(index + 2), request: .register(project: "default", fields)).encode(into: &buffer)
        }
        return buffer
    }

    /// Thousands of pipelined REGISTERs, SIGTERM-style shutdown after the first replies: every
    /// request the engine applied has exactly one reply, then GOAWAY, then the close; no frame is
    /// answered with "ended inside a frame".
    @Test func gracefulShutdownAnswersEveryAppliedRequest() async throws {
        try await TemporaryDirectory.with { directory in
            let engine = try Engine(directory: directory)
            defer { try? engine.close() }
            let (server, group) = try await Self.serverInAServiceGroup(engine)
            let requests = 5000
            let frames = try await withThrowingTaskGroup(of: [ServerFrame].self) { tasks in
                tasks.addTask {
                    try await group.run()
                    return []
                }
                let connection = try await RawConnection.open(server.localPort)
                let burst = try Self.pipelinedRegistrations(requests, prefix: "burst")
                let frames = try await connection.channel.executeThenClose { inbound, outbound in
                    try await withThrowingTaskGroup(of: Void.self) { writer in
                        writer.addTask { try await outbound.write(burst) }
                        var frames: [ServerFrame] = []
                        var triggered = false
                        do {
                            for try await frame in inbound {
                                frames.append(frame)
                                if frames.count == 200 && !triggered {
                                    triggered = true
                                    await group.triggerGracefulShutdown()
                                }
                            }
                        } catch {
                            Issue.record("reading ended with \(error)")
                        }
                        writer.cancelAll()
                        return frames
                    }
                }
                _ = try await tasks.next()
                return frames
            }
            let replies = frames.filter { $0.requestID >= 2 }
            #expect(Set(replies.map(\.requestID)).count == replies.count, "one reply per request")
            let registered = replies.filter { if case .registered = $0.message { return true } else { return false } }
            #expect(registered.count == replies.count, "every reply is a registration (no error): \(replies.filter { if case .registered = $0.message { return false } else { return true } }.prefix(3))")
            #expect(replies.count > 200 && replies.count <= requests)
            #expect(try engine.installationCount() == registered.count, "every applied registration was answered (\(frames.count) frames, last \(String(describing: frames.last?.message)))")
            guard case .goAway? = frames.last?.message else {
                Issue.record("the connection ended without GOAWAY: \(String(describing: frames.last))")
                return
            }
        }
    }

    /// A client that writes its requests and shuts its write side gets WELCOME, every reply, then the close.
    @Test func aHalfClosedClientGetsEveryReply() async throws {
        try await TemporaryDirectory.with { directory in
            try await LoopbackServer.serve(directory: directory) { port, engine in
                let requests = 2000
                let connection = try await RawConnection.open(port, halfClosing: true)
                let frames = try await connection.exchange([try Self.pipelinedRegistrations(requests, prefix: "half")], closeAfterWriting: true)
                guard case .welcome? = frames.first?.message else {
                    Issue.record("no WELCOME: \(frames.prefix(2))")
                    return
                }
                let replies = frames.dropFirst()
                #expect(replies.count == requests)
                #expect(replies.allSatisfy { if case .registered = $0.message { return true } else { return false } })
                #expect(replies.map(\.requestID) == (0..<requests).map { UInt32($0 + 2) }, "in request order")
                #expect(try engine.installationCount() == requests)
            }
        }
    }

    /// The log fails (a sync's I/O error) under pipelined REGISTERs: each is answered once, with
    /// `UNAVAILABLE` (none is registered), and once the disk works the same connection registers
    /// again. (Replies may come in any order: a request the failed log refused at once is
    /// answered before the changes still waiting for the failed sync.)
    @Test func aLogFailureRefusesEveryWaitingChangeAndTheConnectionGoesOn() async throws {
        try await TemporaryDirectory.with { directory in
            let engine = try Engine(directory: directory, durability: .always, logRetryInterval: .milliseconds(5))
            defer { try? engine.close() }
            let (server, group) = try await Self.serverInAServiceGroup(engine)
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                let connection = try await RawConnection.open(server.localPort)
                try await connection.channel.executeThenClose { inbound, outbound in
                    var replies = inbound.makeAsyncIterator()
                    try await outbound.write(try RawConnection.hello())
                    _ = try await RawConnection.frames(1, from: &replies)
                    FileFaults.inject(.init(.sync, pathContains: "\(directory)/segment-", code: EIO))
                    var burst = ByteBuffer()
                    for index in 0..<20 {
                        let fields = RegistrationFields(token: "refused-\(index)", platform: .android, appID: "1:1:android:a")
                        try ClientFrame(requestID: UInt32(index + 2), request: .register(project: "default", fields)).encode(into: &burst)
                    }
                    try await outbound.write(burst)
                    let refused = try await RawConnection.frames(20, from: &replies)
                    #expect(refused.map(\.requestID).sorted() == Array(2...21), "one reply each")
                    for frame in refused {
                        guard case .error(let error) = frame.message, error.code == .unavailable else {
                            Issue.record("expected UNAVAILABLE, got \(frame.message)")
                            continue
                        }
                    }
                    #expect(try engine.installationCount() == 0, "no refused registration is visible")
                    FileFaults.clear(pathContains: "\(directory)/segment-")
                    var registered = false
                    for attempt in 0..<2000 where !registered {
                        let fields = RegistrationFields(token: "after-\(attempt)", platform: .android, appID: "1:1:android:a")
                        try await outbound.write(try RawConnection.bytes(ClientFrame(requestID: UInt32(100 + attempt), request: .register(project: "default", fields))))
                        let reply = try await RawConnection.frames(1, from: &replies)
                        if case .registered = reply.first?.message { registered = true } else { usleep(5000) }
                    }
                    #expect(registered, "the connection registers again once the log writes")
                }
                await group.triggerGracefulShutdown()
                try await tasks.next()
            }
        }
    }

    /// A server on port 0 for `engine`, in a service group whose graceful shutdown a test triggers.
    static func serverInAServiceGroup(_ engine: Engine) async throws -> (FanoutServer, ServiceGroup) {
        let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        let server = try await FanoutServer.bind(engine: engine, keys: LoopbackServer.keys, configuration: LoopbackServer.configuration, logger: quiet)
        return (server, ServiceGroup(services: [server], logger: quiet))
    }
}
