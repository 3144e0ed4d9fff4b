import NIOCore
import NIOHTTP1
import NIOPosix

/// One HTTP/1.1 keep-alive connection to fanoutd's HTTP front, posting FCM v1 sends one at a time
/// as firebase-admin does (a worker per connection: HTTP/1.1 has no usable pipelining), on
/// SwiftNIO's HTTP/1.1 codec.
final class HTTPSendClient: Sendable {
    private let channel: NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>
    private let host: String
    private let apiKey: String

    private init(channel: NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>, host: String, apiKey: String) {
        self.channel = channel
        self.host = host
        self.apiKey = apiKey
    }

    static func connect(host: String, port: Int, apiKey: String) async throws -> HTTPSendClient {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .connect(host: host, port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    return try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(wrappingChannelSynchronously: channel)
                }
            }
        return HTTPSendClient(channel: channel, host: host, apiKey: apiKey)
    }

    /// Runs `body` with this connection's request/response exchange, then closes it.
    func withExchange<T: Sendable>(_ body: (_ post: (_ path: String, _ json: [UInt8]) async throws -> (status: Int, body: [UInt8])) async throws -> T) async throws -> T {
        try await self.channel.executeThenClose { inbound, outbound in
            var responses = inbound.makeAsyncIterator()
            return try await body { path, json in
                var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: path)
                head.headers.add(name: "Host", value: self.host)
                head.headers.add(name: "Authorization", value: "Bearer \(self.apiKey)")
                head.headers.add(name: "Content-Type", value: "application/json")
                head.headers.add(name: "Content-Length", value: "\(json.count)")
                try await outbound.write(contentsOf: [.head(head), .body(.byteBuffer(ByteBuffer(bytes: json))), .end(nil)])
                var status = 0
                var answer: [UInt8] = []
                while let part = try await responses.next() {
                    switch part {
                    case .head(let head): status = Int(head.status.code)
                    case .body(let buffer): answer += buffer.readableBytesView
                    case .end: return (status, answer)
                    }
                }
                throw LoadError("the HTTP front closed the connection")
            }
        }
    }
}
