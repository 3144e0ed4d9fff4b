import FanoutClient
import FanoutModel
import FanoutTestSupport
import FanoutWire
import NIOCore
import NIOPosix
import Testing

/// What `FanoutClient` does when a request cannot go or its reply cannot come: each call ends
/// with an error (none waits forever) and one call's failure does not end the others'.
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
}

/// A server that answers HELLO with WELCOME and closes the connection at the first frame after it.
private struct HangUpServer {
    let channel: any Channel
    var port: Int { self.channel.localAddress?.port ?? 0 }

    static func start() async throws -> HangUpServer {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Handler()) }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        return HangUpServer(channel: channel)
    }

    func close() async throws {
        try await self.channel.close()
    }

    private final class Handler: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        private var requests = FrameReader<ClientRequest>(maximumPayloadSize: 1 << 20)

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var bytes = Self.unwrapInboundIn(data)
            self.requests.append(&bytes)
            while let frame = try? self.requests.nextRequest(seenEOF: false) {
                guard case .hello = frame.request else {
                    context.close(promise: nil)
                    return
                }
                let welcome = Welcome(maximumPayloadSize: 1 << 20, idleTimeoutMilliseconds: 60_000, maximumCredit: 1, maximumInFlight: 64, projects: ["*"])
                var reply = context.channel.allocator.buffer(capacity: 64)
                try? ServerFrame(requestID: frame.requestID, message: .welcome(welcome)).encode(into: &reply)
                context.writeAndFlush(Self.wrapOutboundOut(reply), promise: nil)
            }
        }
    }
}
