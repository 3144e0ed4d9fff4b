internal import FanoutCore
internal import FanoutKeys
public import HummingbirdCore
internal import Logging
public import NIOCore
internal import NIOHTTPTypesHTTP1

/// Hummingbird's HTTP/1.1 channel with `MessagesSendHandler` ahead of its conversion of NIOHTTP1's
/// parts to HTTP types: a send is read and answered on NIOHTTP1's parts, and only the requests the
/// router serves are converted.
struct FrontHTTP1Channel: ServerChildChannel, HTTPChannelHandler {
    typealias Value = HTTP1Channel.Value

    private let inner: HTTP1Channel
    private let sendHandler: @Sendable () -> any RemovableChannelHandler

    init(responder: @escaping HTTPChannelHandler.Responder, sendHandler: @escaping @Sendable () -> any RemovableChannelHandler) {
        self.inner = HTTP1Channel(responder: responder)
        self.sendHandler = sendHandler
    }

    var responder: HTTPChannelHandler.Responder { self.inner.responder }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        self.inner.setup(channel: channel, logger: logger).flatMapThrowing { value in
            let pipeline = channel.pipeline.syncOperations
            try pipeline.addHandler(self.sendHandler(), position: .before(pipeline.handler(type: HTTP1ToHTTPServerCodec.self)))
            return value
        }
    }

    func handle(value: Value, logger: Logger) async {
        await self.inner.handle(value: value, logger: logger)
    }
}
