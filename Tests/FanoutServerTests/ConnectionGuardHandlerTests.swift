import FanoutCore
@testable import FanoutServer
import FanoutWire
import NIOCore
import NIOEmbedded
import Testing

/// The guard in front of every connection, on an `EmbeddedChannel` (its time moved by the test):
/// GOAWAY and close when idle, close when the peer stops reading, and the graceful stop at a frame
/// boundary with its lingering close.
@Suite("Connection guard handler")
struct ConnectionGuardHandlerTests {
    static let stall = TimeAmount.milliseconds(200)

    static func channel() throws -> EmbeddedChannel {
        let channel = EmbeddedChannel(handler: ConnectionGuardHandler(stallTimeout: Self.stall))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return channel
    }

    static let ping = ClientFrame(requestID: 7, request: .ping)

    @Test func anIdleConnectionGetsGoAwayAndIsClosed() throws {
        let channel = try Self.channel()
        channel.pipeline.fireUserInboundEventTriggered(IdleStateHandler.IdleStateEvent.read)
        let frame = try #require(try channel.readServerFrames().first)
        guard case .goAway(.unavailable, _) = frame.message else {
            Issue.record("expected GOAWAY, got \(frame.message)")
            return
        }
        channel.embeddedEventLoop.run()
        #expect(!channel.isActive)
    }

    @Test func aPeerThatStopsReadingIsClosedAfterTheStallTimeout() throws {
        let channel = try Self.channel()
        channel.isWritable = false
        channel.pipeline.fireChannelWritabilityChanged()
        channel.embeddedEventLoop.advanceTime(by: Self.stall - .milliseconds(1))
        #expect(channel.isActive, "not before the stall timeout")
        // Writable again in time: the close is called off.
        channel.isWritable = true
        channel.pipeline.fireChannelWritabilityChanged()
        channel.embeddedEventLoop.advanceTime(by: Self.stall * 2)
        #expect(channel.isActive)
        channel.isWritable = false
        channel.pipeline.fireChannelWritabilityChanged()
        channel.embeddedEventLoop.advanceTime(by: Self.stall)
        #expect(!channel.isActive)
    }

    @Test func stopReadingPassesNoMoreFramesAndEndsTheInput() throws {
        let channel = try Self.channel()
        var ping = ByteBuffer()
        try Self.ping.encode(into: &ping)
        try channel.writeInbound(ping)
        #expect(try channel.readInbound(as: ByteBuffer.self) == ping)
        channel.pipeline.fireUserInboundEventTriggered(ConnectionGuardHandler.StopReading())
        try channel.writeInbound(ping)
        #expect(try channel.readInbound(as: ByteBuffer.self) == nil, "bytes after the stop are dropped")
        #expect(channel.isActive)
        // Once the server shut its output, it waits for the peer's close, at most the linger time.
        channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.outputClosed)
        channel.embeddedEventLoop.advanceTime(by: ConnectionGuardHandler.lingerTimeout - .milliseconds(1))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(!channel.isActive)
    }

    @Test func afterTheStopThePeersCloseClosesAtOnce() throws {
        let channel = try Self.channel()
        channel.pipeline.fireUserInboundEventTriggered(ConnectionGuardHandler.StopReading())
        channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        channel.embeddedEventLoop.run()
        #expect(!channel.isActive)
    }
}
