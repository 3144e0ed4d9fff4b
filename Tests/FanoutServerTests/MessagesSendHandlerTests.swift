import FanoutCore
@testable import FanoutHTTP
import FanoutKeys
import HTTPTypes
import NIOCore
import NIOEmbedded
import NIOHTTPTypes
import Testing

/// The send's channel handler on an `EmbeddedChannel`, with a change log the test acknowledges by
/// hand: a send is answered once the log has it; what arrives meanwhile (the next request, a
/// graceful shutdown's quiesce) reaches the router only after that answer; a quiesce that comes
/// while a send's body is read waits for the send's answer too.
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
        let handler = MessagesSendHandler(engine: engine, keys: { LoopbackServer.keys }, metrics: HTTPRequestMetrics(factory: engine.metrics.factory))
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

    @Test func onlyTheSendsPathIsServedHere() {
        func project(_ method: HTTPRequest.Method, _ path: String) -> Substring? {
            MessagesSendHandler.sendProject(of: HTTPRequest(method: method, scheme: "http", authority: "fanout", path: path))
        }
        #expect(project(.post, "/v1/projects/my-app/messages:send") == "my-app")
        #expect(project(.post, "/v1/projects/my-app/messages:send?alt=json") == "my-app")
        #expect(project(.get, "/v1/projects/my-app/messages:send") == nil)
        #expect(project(.post, "/v1/projects//messages:send") == nil)
        #expect(project(.post, "/v1/projects/a/b/messages:send") == nil)
        #expect(project(.post, "/v1/projects/my-app/messages:send/x") == nil)
        #expect(project(.post, "/v1/projects/my-app/registrations") == nil)
    }
}
