import NIOCore
import NIOHTTP1
import NIOPosix

/// One HTTP/1.1 keep-alive connection to fanoutd's HTTP front, posting FCM v1 sends one at a time
/// as firebase-admin does (a worker per connection: HTTP/1.1 has no usable pipelining), on
/// SwiftNIO's HTTP/1.1 codec. A post is one write and one promise, answered on the event loop
/// with no async sequence in between, so that the harness takes little of the CPU it shares with
/// the server (as the binary protocol's client does).
final class HTTPSendClient: Sendable {
    private let channel: any Channel

    private init(channel: any Channel) {
        self.channel = channel
    }

    static func connect(host: String, port: Int, apiKey: String) async throws -> HTTPSendClient {
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: host)
        headers.add(name: "Authorization", value: "Bearer \(apiKey)")
        headers.add(name: "Content-Type", value: "application/json")
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { [headers] channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(ExchangeHandler(headers: headers))
                }
            }
            .connect(host: host, port: port)
            .get()
        return HTTPSendClient(channel: channel)
    }

    /// Posts `json` to `path` and returns the answer's status and body.
    func post(_ path: String, _ json: [UInt8]) async throws -> (status: Int, body: [UInt8]) {
        let answer = self.channel.eventLoop.makePromise(of: Answer.self)
        self.channel.writeAndFlush(Exchange(path: path, json: json, answer: answer), promise: nil)
        let (status, body) = try await answer.futureResult.get()
        return (status, body)
    }

    func close() async {
        try? await self.channel.close()
    }

    typealias Answer = (status: Int, body: [UInt8])

    struct Exchange {
        let path: String
        let json: [UInt8]
        let answer: EventLoopPromise<Answer>
    }

    /// Writes each exchange's request and completes its promise with the answer.
    private final class ExchangeHandler: ChannelDuplexHandler {
        typealias InboundIn = HTTPClientResponsePart
        typealias OutboundIn = Exchange
        typealias OutboundOut = HTTPClientRequestPart

        private let headers: HTTPHeaders
        private var waiting: EventLoopPromise<Answer>?
        private var status = 0
        private var body: [UInt8] = []

        init(headers: HTTPHeaders) {
            self.headers = headers
        }

        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            let exchange = self.unwrapOutboundIn(data)
            guard self.waiting == nil else {
                return exchange.answer.fail(LoadError("one request at a time on an HTTP/1.1 connection"))
            }
            self.waiting = exchange.answer
            var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: exchange.path, headers: self.headers)
            head.headers.add(name: "Content-Length", value: String(exchange.json.count))
            context.write(self.wrapOutboundOut(.head(head)), promise: nil)
            context.write(self.wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: exchange.json)))), promise: nil)
            context.write(self.wrapOutboundOut(.end(nil)), promise: promise)
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch self.unwrapInboundIn(data) {
            case .head(let head):
                self.status = Int(head.status.code)
                self.body.removeAll(keepingCapacity: true)
            case .body(let buffer):
                self.body += buffer.readableBytesView
            case .end:
                let waiting = self.waiting
                self.waiting = nil
                waiting?.succeed((self.status, self.body))
            }
        }

        func channelInactive(context: ChannelHandlerContext) {
            self.fail(LoadError("the HTTP front closed the connection"))
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            self.fail(error)
            context.close(promise: nil)
        }

        private func fail(_ error: any Error) {
            let waiting = self.waiting
            self.waiting = nil
            waiting?.fail(error)
        }
    }
}
