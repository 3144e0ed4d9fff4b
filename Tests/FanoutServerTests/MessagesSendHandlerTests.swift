import FanoutCore
@testable import FanoutHTTP
import FanoutKeys
import HTTPTypes
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOHTTPTypes
import Testing

/// The send's channel handler on an `EmbeddedChannel`, with a change log the test acknowledges by
/// hand: a send is answered once the log has it; what arrives meanwhile (the next request, a
/// graceful shutdown's quiesce) reaches the router only after that answer; a quiesce that comes
/// while a send's body is read waits for the send's answer too. HTTP/2 streams hand it HTTP types'
/// parts, HTTP/1.1 connections NIOHTTP1's.
@Suite("HTTP front: the send's channel handler")
struct MessagesSendHandlerTests {
    /// Stands for Hummingbird's side: records what the handler passes on.
    final class Router: ChannelInboundHandler {
        typealias InboundIn = HTTPRequestPart
        var seen: [String] = []

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch self.unwrapInboundIn(data) {
            case .head(let head): self.seen.append("head \(head.method) \(head.path ?? "")")
            case .body: self.seen.append("body")
            case .end: self.seen.append("end")
            }
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            self.seen.append(event is ChannelShouldQuiesceEvent ? "quiesce" : "event")
        }
    }

    static func pipeline() throws -> (EmbeddedChannel, Router, InMemoryChangeLog) {
        let log = InMemoryChangeLog(acknowledgement: .manual)
        let engine = Engine(log: log)
        let handler = MessagesSendHandler<HTTPTypesParts>(engine: engine, keys: { LoopbackServer.keys }, metrics: HTTPRequestMetrics(factory: engine.metrics.factory))
        let router = Router()
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(handler)
        try channel.pipeline.syncOperations.addHandler(router)
        return (channel, router, log)
    }

    static func sendHead() -> HTTPRequestPart {
        .head(HTTPRequest(method: .post, scheme: "http", authority: "fanout", path: "/v1/projects/default/messages:send", headerFields: [.authorization: "Bearer \(LoopbackServer.adminKey)"]))
    }

    static func body() -> HTTPRequestPart {
        .body(ByteBuffer(string: #"{"message":{"topic":"news","data":{"k":"v"}}}"#))
    }

    /// The answers written so far: their statuses.
    static func answered(_ channel: EmbeddedChannel) throws -> [Int] {
        var statuses: [Int] = []
        while let part = try channel.readOutbound(as: HTTPResponsePart.self) {
            if case .head(let head) = part { statuses.append(head.status.code) }
        }
        return statuses
    }

    @Test func whatComesWhileASendWaitsForTheLogReachesTheRouterAfterItsAnswer() throws {
        let (channel, router, log) = try Self.pipeline()
        try channel.writeInbound(Self.sendHead())
        try channel.writeInbound(Self.body())
        try channel.writeInbound(HTTPRequestPart.end(nil))
        try channel.writeInbound(HTTPRequestPart.head(HTTPRequest(method: .get, scheme: "http", authority: "fanout", path: "/healthz")))
        try channel.writeInbound(HTTPRequestPart.end(nil))
        channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        channel.embeddedEventLoop.run()
        #expect(try Self.answered(channel) == [], "the send waits for the log")
        #expect(router.seen == [], "the next request waits for the send's answer")

        log.acknowledge(through: .max)
        channel.embeddedEventLoop.run()
        #expect(try Self.answered(channel) == [200])
        #expect(router.seen == ["head GET /healthz", "end"], "the quiesce waits for the router's answer")

        // The router answers; then the quiesce reaches it.
        try channel.writeOutbound(HTTPResponsePart.head(HTTPResponse(status: .ok)))
        try channel.writeOutbound(HTTPResponsePart.end(nil))
        #expect(router.seen == ["head GET /healthz", "end", "quiesce"])
    }

    @Test func aQuiesceWhileASendsBodyIsReadWaitsForItsAnswer() throws {
        let (channel, router, log) = try Self.pipeline()
        try channel.writeInbound(Self.sendHead())
        channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        #expect(router.seen == [], "not passed on while the body is read: the router would close the connection")
        try channel.writeInbound(Self.body())
        try channel.writeInbound(HTTPRequestPart.end(nil))
        log.acknowledge(through: .max)
        channel.embeddedEventLoop.run()
        #expect(try Self.answered(channel) == [200])
        #expect(router.seen == ["quiesce"])
    }

    /// Reading goes on while a send waits for the log (no `epoll_ctl`s for nothing), and pauses
    /// once a pipelined request waits, until the send's answer lets it through.
    @Test func readingPausesOnlyOnceARequestWaits() throws {
        final class ReadCounter: ChannelOutboundHandler {
            typealias OutboundIn = Never
            var reads = 0
            func read(context: ChannelHandlerContext) {
                self.reads += 1
                context.read()
            }
        }
        let counter = ReadCounter()
        let (channel, router, log) = try Self.pipeline()
        try channel.pipeline.syncOperations.addHandler(counter, position: .first)
        try channel.writeInbound(Self.sendHead())
        try channel.writeInbound(Self.body())
        try channel.writeInbound(HTTPRequestPart.end(nil))
        channel.read()
        #expect(counter.reads == 1, "a read while the send waits for the log goes through")

        try channel.writeInbound(HTTPRequestPart.head(HTTPRequest(method: .get, scheme: "http", authority: "fanout", path: "/healthz")))
        channel.read()
        #expect(counter.reads == 1, "withheld: a request waits")

        log.acknowledge(through: .max)
        channel.embeddedEventLoop.run()
        #expect(try Self.answered(channel) == [200])
        #expect(router.seen == ["head GET /healthz"])
        #expect(counter.reads == 2, "the withheld read once nothing waits")
    }

    @Test func onlyTheSendsPathIsServedHere() {
        func project(_ path: String) -> String? { SendRequestHead.sendProject(ofPath: path) }
        #expect(project("/v1/projects/my-app/messages:send") == "my-app")
        #expect(project("/v1/projects/my-app/messages:send?alt=json") == "my-app")
        #expect(project("/v1/projects//messages:send") == nil)
        #expect(project("/v1/projects/a/b/messages:send") == nil)
        #expect(project("/v1/projects/my-app/messages:send/x") == nil)
        #expect(project("/v1/projects/my-app/registrations") == nil)
        #expect(project("/v1/projects/messages:send") == nil)

        func isSend(_ part: SendRequestPart) -> Bool {
            if case .head(let head) = part { return head != nil }
            return false
        }
        let path = "/v1/projects/my-app/messages:send"
        #expect(isSend(HTTPTypesParts.classify(.head(HTTPRequest(method: .post, scheme: "http", authority: "fanout", path: path)))))
        #expect(!isSend(HTTPTypesParts.classify(.head(HTTPRequest(method: .get, scheme: "http", authority: "fanout", path: path)))))
        #expect(isSend(HTTP1Parts.classify(.head(HTTPRequestHead(version: .http1_1, method: .POST, uri: path)))))
        #expect(!isSend(HTTP1Parts.classify(.head(HTTPRequestHead(version: .http1_1, method: .PUT, uri: path)))))
    }

    /// What NIOHTTP1's head says of the key and of keep-alive reaches the send.
    @Test func anHTTP1HeadGivesItsKeyAndWhetherTheConnectionCloses() throws {
        func head(_ version: HTTPVersion, _ headers: [(String, String)]) throws -> SendRequestHead {
            let part = HTTP1Parts.classify(.head(HTTPRequestHead(version: version, method: .POST, uri: "/v1/projects/p-1234/messages:send", headers: HTTPHeaders(headers))))
            guard case .head(let head?) = part else { throw FanoutError(.internal, "not a send") }
            return head
        }
        let keyed = try head(.http1_1, [("authorization", "Bearer k"), ("X-Goog-Api-Key", "g")])
        #expect(keyed.project == "p-1234" && keyed.authorization == "Bearer k" && keyed.googleAPIKey == "g" && !keyed.closesConnection)
        #expect(try head(.http1_1, [("Connection", "close")]).closesConnection)
        #expect(try head(.http1_0, []).closesConnection)
        #expect(try !head(.http1_0, [("Connection", "keep-alive")]).closesConnection)
    }

    /// On NIOHTTP1's parts as on HTTP types': the next request waits for the send's answer, and
    /// the router's answer (in NIOHTTP1's parts, after Hummingbird's conversion) lets it through.
    @Test func onHTTP1PartsTheNextRequestWaitsForTheSendsAnswer() throws {
        final class Router: ChannelInboundHandler {
            typealias InboundIn = HTTPServerRequestPart
            var seen: [String] = []
            func channelRead(context: ChannelHandlerContext, data: NIOAny) {
                switch self.unwrapInboundIn(data) {
                case .head(let head): self.seen.append("head \(head.method) \(head.uri)")
                case .body: self.seen.append("body")
                case .end: self.seen.append("end")
                }
            }
        }
        let log = InMemoryChangeLog(acknowledgement: .manual)
        let engine = Engine(log: log)
        let router = Router()
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(MessagesSendHandler<HTTP1Parts>(engine: engine, keys: { LoopbackServer.keys }, metrics: HTTPRequestMetrics(factory: engine.metrics.factory)))
        try channel.pipeline.syncOperations.addHandler(router)

        let headers = HTTPHeaders([("Authorization", "Bearer \(LoopbackServer.adminKey)")])
        try channel.writeInbound(HTTPServerRequestPart.head(HTTPRequestHead(version: .http1_1, method: .POST, uri: "/v1/projects/default/messages:send", headers: headers)))
        try channel.writeInbound(HTTPServerRequestPart.body(ByteBuffer(string: #"{"message":{"topic":"news"}}"#)))
        try channel.writeInbound(HTTPServerRequestPart.end(nil))
        try channel.writeInbound(HTTPServerRequestPart.head(HTTPRequestHead(version: .http1_1, method: .GET, uri: "/healthz")))
        try channel.writeInbound(HTTPServerRequestPart.end(nil))
        channel.embeddedEventLoop.run()
        #expect(try channel.readOutbound(as: HTTPServerResponsePart.self) == nil, "the send waits for the log")
        #expect(router.seen == [])

        log.acknowledge(through: .max)
        channel.embeddedEventLoop.run()
        guard case .head(let head) = try channel.readOutbound(as: HTTPServerResponsePart.self) else { throw FanoutError(.internal, "no answer") }
        #expect(head.status == .ok)
        #expect(head.headers["content-type"] == ["application/json; charset=UTF-8"])
        guard case .body(.byteBuffer(let body)) = try channel.readOutbound(as: HTTPServerResponsePart.self) else { throw FanoutError(.internal, "no body") }
        #expect(String(buffer: body).hasPrefix(#"{"name":"projects/default/messages/"#))
        #expect(head.headers["content-length"] == [String(body.readableBytes)])
        #expect(try channel.readOutbound(as: HTTPServerResponsePart.self) == .end(nil))
        #expect(router.seen == ["head GET /healthz", "end"])
    }
}
