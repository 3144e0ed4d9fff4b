import FanoutCore
import FanoutKeys
@testable import FanoutServer
import FanoutTestSupport
import FanoutWire
import Logging
import NIOCore
import NIOEmbedded
import Testing

/// The connection's handler on an `EmbeddedChannel`, with a change log the test acknowledges by
/// hand: reads are answered in the turn that decoded them, a change's reply waits for the log and
/// leaves with the others its acknowledgement released, and reads are held while too many replies
/// wait.
@Suite("Connection handler")
struct ConnectionHandlerTests {
    /// Counts the reads the handler passes towards the socket.
    final class ReadCounter: ChannelOutboundHandler {
        typealias OutboundIn = Any
        var reads = 0

        func read(context: ChannelHandlerContext) {
            self.reads += 1
            context.read()
        }
    }

    static func connection(maximumInFlight: Int, notifiesNewestFirst: Bool = false) throws -> (channel: EmbeddedChannel, reads: ReadCounter, log: InMemoryChangeLog) {
        let log = InMemoryChangeLog(acknowledgement: .manual, notifiesNewestFirst: notifiesNewestFirst)
        let engine = Engine(log: log)
        let settings = ConnectionSettings(
            executor: RequestExecutor(engine: engine, maximumPayloadSize: 1 << 20),
            keys: KeyRing(LoopbackServer.keys),
            welcome: Welcome(maximumPayloadSize: 1 << 20, idleTimeoutMilliseconds: 60_000, maximumCredit: 100, maximumInFlight: UInt32(maximumInFlight), projects: []),
            maximumInFlight: maximumInFlight,
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }),
            strangers: StrangerLimits(.init(handshakeTimeout: .seconds(600), maximumPendingHandshakes: 16)),
            metrics: ServerMetrics(factory: engine.metrics.factory)
        )
        let reads = ReadCounter()
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(reads)
        try channel.pipeline.syncOperations.addHandler(ConnectionHandler(settings: settings))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        try channel.writeRequest(ClientFrame(requestID: 1, request: .hello(Hello(role: .admin, credential: .apiKey(Array(LoopbackServer.adminKey.utf8)), clientName: "test"))))
        guard case .welcome = try #require(try channel.readServerFrames().first).message else {
            Issue.record("expected WELCOME")
            throw CancellationError()
        }
        return (channel, reads, log)
    }

    static func register(_ id: UInt32) -> ClientFrame {
        ClientFrame(requestID: id, request: .register(project: "default", RegistrationFields(token: "handler-\(id)", platform: .web, appID: "1:1:web:a")))
    }

    @Test func aChangeIsAnsweredOnceTheLogHasItAndAReadAtOnce() throws {
        let (channel, _, log) = try Self.connection(maximumInFlight: 16)
        try channel.writeRequest(Self.register(2))
        try channel.writeRequest(Self.register(3))
        try channel.writeRequest(ClientFrame(requestID: 4, request: .installationCount(project: "default")))
        // The read sees both changes (applied in order) and does not wait for the log.
        channel.embeddedEventLoop.run()
        #expect(try channel.readServerFrames() == [ServerFrame(requestID: 4, message: .count(.installationCount, 2))], "no change is answered before the log acknowledges it")
        log.acknowledge(through: .max)
        channel.embeddedEventLoop.run()
        let writes = try channel.readServerWrites()
        #expect(writes.count == 1, "the replies one acknowledgement released leave in one write")
        let replies = writes.flatMap { $0 }
        #expect(replies.map(\.requestID) == [2, 3])
        #expect(replies.allSatisfy { if case .registered = $0.message { true } else { false } })
        _ = try channel.finish()
    }

    /// The handler decodes the socket's bytes itself: frames split anywhere across reads, or
    /// several in one read, are applied as when each came whole.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func framesSplitAcrossReadsOrJoinedInOneAreApplied(seed: UInt64) throws {
        var random = SeededRandomNumberGenerator(seed: seed)
        let (channel, _, _) = try Self.connection(maximumInFlight: 64)
        var bytes = ByteBuffer()
        for id in 2...6 { try Self.register(UInt32(id)).encode(into: &bytes) }
        // A large frame (about 50 KB) among them, which comes in a great many reads.
        let batch = (0..<300).map { RegistrationFields(token: "batch-\($0)-" + String(repeating: "t", count: 150), platform: .android, appID: "1:1:android:a") }
        try ClientFrame(requestID: 7, request: .registerBatch(project: "default", batch)).encode(into: &bytes)
        try ClientFrame(requestID: 8, request: .installationCount(project: "default")).encode(into: &bytes)
        while bytes.readableBytes > 0 {
            let piece = bytes.readSlice(length: min(bytes.readableBytes, Int.random(in: 1...120, using: &random)))!
            try channel.writeInbound(piece)
        }
        channel.embeddedEventLoop.run()
        #expect(try channel.readServerFrames() == [ServerFrame(requestID: 8, message: .count(.installationCount, 305))])
        _ = try channel.finish()
    }

    /// A frame the end of the input cuts short is refused with the frame's request id; what came
    /// whole before it is applied.
    @Test func aFrameCutShortByTheEndOfTheInputIsAnError() throws {
        let (channel, _, _) = try Self.connection(maximumInFlight: 16)
        var bytes = ByteBuffer()
        try ClientFrame(requestID: 2, request: .installationCount(project: "default")).encode(into: &bytes)
        try Self.register(3).encode(into: &bytes)
        try channel.writeInbound(bytes.getSlice(at: 0, length: bytes.readableBytes - 5)!)
        channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        channel.embeddedEventLoop.run()
        let frames = try channel.readServerFrames()
        #expect(frames.first == ServerFrame(requestID: 2, message: .count(.installationCount, 0)))
        guard frames.count == 2, case .error(let error) = frames[1].message else {
            Issue.record("expected the count, then an ERROR: \(frames)")
            return
        }
        #expect(frames[1].requestID == 3 && error.code == .invalidArgument)
        _ = try? channel.finish()
    }

    /// Catches the idle events the handler tells the pipeline (the guard in front acts on them).
    final class IdleEvents: ChannelInboundHandler {
        typealias InboundIn = Any
        var count = 0

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if let idle = event as? IdleStateHandler.IdleStateEvent, idle == .read { self.count += 1 }
        }
    }

    /// Reads keep the `IdleStateHandler` quiet, frames or not: a frame whose bytes trickle in and
    /// never end makes the connection idle once the idle timeout (60 s here) has passed since its
    /// first bytes; frames that come whole within it do not.
    @Test func aFrameThatDoesNotComeWholeWithinTheIdleTimeoutMakesTheConnectionIdle() throws {
        let (channel, _, _) = try Self.connection(maximumInFlight: 16)
        let idle = IdleEvents()
        try channel.pipeline.syncOperations.addHandler(idle)
        var bytes = ByteBuffer()
        try ClientFrame(requestID: 2, request: .installationCount(project: "default")).encode(into: &bytes)
        // Whole frames, each cut in two reads 50 s apart: never idle.
        for _ in 0..<3 {
            try channel.writeInbound(bytes.getSlice(at: 0, length: 5)!)
            channel.embeddedEventLoop.advanceTime(by: .seconds(50))
            try channel.writeInbound(bytes.getSlice(at: 5, length: bytes.readableBytes - 5)!)
            channel.embeddedEventLoop.advanceTime(by: .seconds(50))
        }
        #expect(idle.count == 0)
        #expect(try channel.readServerFrames().count == 3)
        // One byte every 20 s of a frame that never ends: idle 60 s after its first byte.
        for offset in 0..<3 {
            try channel.writeInbound(bytes.getSlice(at: offset, length: 1)!)
            channel.embeddedEventLoop.advanceTime(by: .seconds(20))
        }
        #expect(idle.count == 1)
        _ = try? channel.finish()
    }

    /// The log may call back out of order (a change applied while the writer tells the others
    /// hears at once); the replies of changes still leave in the order the changes were applied.
    @Test func repliesOfChangesLeaveInTheOrderApplied() throws {
        let (channel, _, log) = try Self.connection(maximumInFlight: 16, notifiesNewestFirst: true)
        for id in 2...5 { try channel.writeRequest(Self.register(UInt32(id))) }
        log.acknowledge(through: .max)
        channel.embeddedEventLoop.run()
        #expect(try channel.readServerFrames().map(\.requestID) == [2, 3, 4, 5])
        _ = try channel.finish()
    }

    /// The handler writes its next output into the buffer of its last large one: never while the
    /// socket still holds that buffer, and each write carries only its own frames.
    @Test func aLargeOutputsBufferIsReusedOnlyOnceTheSocketHasLetGoOfIt() throws {
        let (channel, _, log) = try Self.connection(maximumInFlight: 16)
        func batch(_ id: UInt32) -> ClientFrame {
            // 100 registrations: a reply of about 25 KB, a buffer the handler keeps.
            let items = (0..<100).map { RegistrationFields(token: "reuse-\(id)-\($0)-" + String(repeating: "t", count: 150), platform: .android, appID: "1:1:android:a") }
            return ClientFrame(requestID: id, request: .registerBatch(project: "default", items))
        }
        func answer(_ id: UInt32) throws {
            try channel.writeRequest(batch(id))
            log.acknowledge(through: .max)
            channel.embeddedEventLoop.run()
        }
        try answer(2)
        try answer(3)  // the first reply's buffer is still in the channel
        var writes = try channel.readServerWrites()
        try answer(4)  // both gone: the spare buffer is written into again
        writes += try channel.readServerWrites()
        #expect(writes.map { $0.map(\.requestID) } == [[2], [3], [4]], "one frame per write, each its own")
        for frames in writes {
            guard case .registeredBatch(let outcomes) = frames.first?.message else {
                Issue.record("expected a REGISTER_BATCH reply, got \(frames)")
                continue
            }
            #expect(outcomes.count == 100)
        }
        _ = try channel.finish()
    }

    /// A connection's waiting replies wait on the log together: one callback for all of them,
    /// asked again for those an acknowledgement did not reach.
    @Test func aConnectionWaitsOnTheLogOnceForAllItsChanges() throws {
        let (channel, _, log) = try Self.connection(maximumInFlight: 16)
        for id in 2...6 { try channel.writeRequest(Self.register(UInt32(id))) }
        channel.embeddedEventLoop.run()
        #expect(log.waiterCount == 1, "five changes wait on the log once")
        log.acknowledge(through: 2)
        channel.embeddedEventLoop.run()
        #expect(try channel.readServerFrames().map(\.requestID) == [2, 3])
        #expect(log.waiterCount == 1, "the three left wait once again")
        log.acknowledge(through: .max)
        channel.embeddedEventLoop.run()
        #expect(try channel.readServerFrames().map(\.requestID) == [4, 5, 6])
        #expect(log.waiterCount == 0)
        _ = try channel.finish()
    }

    @Test func readsWaitWhileTooManyRepliesDo() throws {
        let (channel, reads, log) = try Self.connection(maximumInFlight: 2)
        try channel.writeRequest(Self.register(2))
        channel.read()
        let before = reads.reads
        try channel.writeRequest(Self.register(3))
        channel.read()
        #expect(reads.reads == before, "two replies wait: the read is held")
        log.acknowledge(through: 1)
        channel.embeddedEventLoop.run()
        #expect(try channel.readServerFrames().map(\.requestID) == [2])
        #expect(reads.reads == before + 1, "a reply left: the held read goes on")
        log.acknowledge(through: .max)
        channel.embeddedEventLoop.run()
        #expect(try channel.readServerFrames().map(\.requestID) == [3])
        _ = try channel.finish()
    }
}

extension EmbeddedChannel {
    /// A request as the socket brings it: the frame's bytes (the handler decodes them).
    func writeRequest(_ frame: ClientFrame) throws {
        var bytes = ByteBuffer()
        try frame.encode(into: &bytes)
        try self.writeInbound(bytes)
    }
}
