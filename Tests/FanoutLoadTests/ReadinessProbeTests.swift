@testable import FanoutLoad
import FanoutTestSupport
import NIOCore
import NIOPosix
import Testing

/// The harness's probe of fanoutd's HTTP front: a port counts as served only when a listener
/// accepts, not when the probe's connection was made to itself (TCP's simultaneous open, which
/// a poll of a port in the ephemeral range now and then gets on loopback).
@Suite("Readiness probe")
struct ReadinessProbeTests {
    @Test func aConnectionToItselfIsNotAListener() throws {
        let port = try LoopbackPort.free()
        // The probe's end bound to the port it probes: the kernel connects it to itself.
        #expect(!FanoutdProcess.accepts(port: port, localPort: port))
        #expect(!FanoutdProcess.accepts(port: port), "nothing listens there")
    }

    @Test func aListenerAccepts() async throws {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(channel.localAddress?.port)
        #expect(FanoutdProcess.accepts(port: port))
        try await channel.close()
    }
}
