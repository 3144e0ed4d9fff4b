import FanoutClient
import FanoutModel
import FanoutTestSupport
import FanoutWire
import NIOCore
import NIOPosix
import Synchronization
import Testing

/// What `FanoutClient` does when a request cannot go or its reply cannot come: each call ends
/// with an error (none waits forever) and one call's failure does not end the others'. (A call
/// that waited forever would be cancelled at the time limit, and fail the test.)
@Suite("Client: failures", .timeLimit(.minutes(2)))
struct ClientFailureTests {
    /// A request that cannot be encoded is refused before it is queued, naming the field; the
    /// connection goes on.
    @Test func anUnencodableRequestThrowsAndTheConnectionGoesOn() async throws {
        try await TemporaryDirectory.with { directory in
            try await LoopbackServer.serve(directory: directory) { port, _ in
                let client = try await LoopbackServer.connect(port)
                let topic = String(repeating: "t", count: Int(UInt16.max) + 1)
                let error = await #expect(throws: FanoutError.self) { try await client.subscriberCount(of: topic) }
                #expect(error?.code == .invalidArgument)
                #expect(error?.message.contains("65536 bytes") == true)
                try await client.ping()
                try await client.close()
            }
        }
    }

    /// Requests in flight when the server closes the connection fail with `UNAVAILABLE`, and so
    /// does every call after it.
    @Test func callsInFlightAndAfterALostConnectionFailUnavailable() async throws {
        let server = try await HangUpServer.start()
        let client = try await FanoutClient.connect(host: "127.0.0.1", port: server.port, apiKey: "any")
        try await withThrowingTaskGroup(of: FanoutError.Code?.self) { group in
            for _ in 0..<20 {
                group.addTask {
                    do {
                        try await client.ping()
                        return nil
                    } catch let error as FanoutError {
                        return error.code
                    }
                }
            }
            var codes: [FanoutError.Code?] = []
            for try await code in group { codes.append(code) }
            #expect(codes == Array(repeating: .unavailable, count: 20))
        }
        let after = await #expect(throws: FanoutError.self) { try await client.ping() }
        #expect(after?.code == .unavailable)
        let afterClose = await #expect(throws: FanoutError.self) {
            try await client.close()
            try await client.ping()
        }
        #expect(afterClose?.code == .unavailable)
        try await server.close()
    }

    /// A call whose task is cancelled ends at once with `CancellationError`, though the server
    /// never answers; the other calls on the connection go on waiting.
    @Test func aCancelledCallEndsWithoutItsReply() async throws {
        let server = try await HangUpServer.start(hangsUp: false)
        let client = try await FanoutClient.connect(host: "127.0.0.1", port: server.port, apiKey: "any")
        let waiting = Task { try await client.ping() }
        let cancelled = Task { try await client.ping() }
        try await server.waitForRequests(2)
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        let alreadyCancelled = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await client.ping()
        }
        await #expect(throws: CancellationError.self) { try await alreadyCancelled.value }
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
        try await client.close()
        try await server.close()
    }
}

/// A server that answers HELLO with WELCOME, then closes the connection at the first frame after
/// it (`hangsUp`) or counts the frames and never answers them.
private struct HangUpServer {
    let channel: any Channel
    let received: Counter
    var port: Int { self.channel.localAddress?.port ?? 0 }

    /// Requests received after HELLO, on any connection.
    final class Counter: Sendable {
        private let count = Mutex(0)
        func add() { self.count.withLock { $0 += 1 } }
        var value: Int { self.count.withLock { $0 } }
    }

    static func start(hangsUp: Bool = true) async throws -> HangUpServer {
        let received = Counter()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(Handler(hangsUp: hangsUp, received: received))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        return HangUpServer(channel: channel, received: received)
    }

    /// Waits until `count` requests after HELLO have come.
    func waitForRequests(_ count: Int) async throws {
        while self.received.value < count {
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    func close() async throws {
        try await self.channel.close()
    }

    private final class Handler: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        private var requests = FrameReader<ClientRequest>(maximumPayloadSize: 1 << 20)
        private let hangsUp: Bool
        private let received: Counter

        init(hangsUp: Bool, received: Counter) {
            self.hangsUp = hangsUp
            self.received = received
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var bytes = Self.unwrapInboundIn(data)
            self.requests.append(&bytes)
            while let frame = try? self.requests.nextRequest(seenEOF: false) {
                guard case .hello = frame.request else {
                    self.received.add()
                    if self.hangsUp {
                        context.close(promise: nil)
                        return
                    }
                    continue
                }
                let welcome = Welcome(maximumPayloadSize: 1 << 20, idleTimeoutMilliseconds: 60_000, maximumCredit: 1, maximumInFlight: 64, projects: ["*"])
                var reply = context.channel.allocator.buffer(capacity: 64)
                try? ServerFrame(requestID: frame.requestID, message: .welcome(welcome)).encode(into: &reply)
                context.writeAndFlush(Self.wrapOutboundOut(reply), promise: nil)
            }
        }
    }
}
