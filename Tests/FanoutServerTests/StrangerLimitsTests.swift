import FanoutClient
import FanoutCore
import FanoutServer
import FanoutTestSupport
import FanoutWire
import NIOCore
import Testing

/// Limits for strangers (docs/security.md): a handshake deadline, a cap on connections that have
/// not finished HELLO, and a delay after failed authentications from the same address, all in STATS.
@Suite("Server: limits for strangers")
struct StrangerLimitsTests {
    /// STATS carries the same counters; read from the server, no connection (itself subject to
    /// the deadline on a loaded machine) is needed.
    static func statistics(_ server: FanoutServer) -> ConnectionStatistics {
        server.connectionStatistics
    }

    @Test func aConnectionThatSaysNothingIsClosedAtTheDeadline() async throws {
        var configuration = LoopbackServer.configuration
        configuration.handshakeTimeout = .milliseconds(200)
        try await TemporaryDirectory.with { directory in
            try await LoopbackServer.withServer(directory: directory, configuration: configuration) { server, _ in
                let silent = try await RawConnection.open(server.localPort)
                let frames = try await silent.exchange([])
                guard case .error(let error)? = frames.first?.message else {
                    Issue.record("expected an error, got \(frames)")
                    return
                }
                #expect(error.code == .unauthenticated && error.message == "HELLO did not come in time")
                let statistics = Self.statistics(server)
                #expect(statistics.handshakeTimeouts == 1)
                #expect(statistics.accepted == 1)
            }
        }
    }

    @Test func connectionsWithoutHelloAreCapped() async throws {
        var configuration = LoopbackServer.configuration
        configuration.maximumPendingHandshakes = 2
        try await TemporaryDirectory.with { directory in
            try await LoopbackServer.withServer(directory: directory, configuration: configuration) { server, _ in
                let port = server.localPort
                let first = try await RawConnection.open(port)
                let second = try await RawConnection.open(port)
                // The third stranger is closed at once, without a word.
                let third = try await RawConnection.open(port)
                #expect(try await third.exchange([]).isEmpty)
                // A stranger that finishes HELLO makes room.
                let welcomed = try await first.channel.executeThenClose { inbound, outbound in
                    try await outbound.write(try RawConnection.hello())
                    var iterator = inbound.makeAsyncIterator()
                    return try await RawConnection.frames(1, from: &iterator)
                }
                #expect(welcomed.first?.message.opcode == Opcode.hello.reply)
                let statistics = Self.statistics(server)
                #expect(statistics.refusedOverPendingLimit == 1)
                #expect(statistics.accepted == 3)
                // STATS says the same.
                let admin = try await LoopbackServer.connect(port)
                #expect(try await admin.statistics().connections.refusedOverPendingLimit == 1)
                try await admin.close()
                try await second.channel.channel.close()
            }
        }
    }

    @Test func repeatedFailuresFromAnAddressAreAnsweredLater() async throws {
        var configuration = LoopbackServer.configuration
        configuration.authenticationFailureDelay = .milliseconds(100)
        configuration.maximumAuthenticationFailureDelay = .seconds(5)
        try await TemporaryDirectory.with { directory in
            try await LoopbackServer.withServer(directory: directory, configuration: configuration) { server, _ in
                let port = server.localPort
                var lastDuration = Duration.zero
                for attempt in 0..<3 {
                    let started = ContinuousClock.now
                    let raw = try await RawConnection.open(port)
                    let frames = try await raw.exchange([try RawConnection.hello(key: "wrong-key-00000000000\(attempt)")])
                    lastDuration = ContinuousClock.now - started
                    guard case .error(let error)? = frames.first?.message else {
                        Issue.record("expected an error, got \(frames)")
                        return
                    }
                    #expect(error.code == .unauthenticated)
                }
                // The third failure waited at least 200 ms (100 ms, doubled); a lower bound only.
                #expect(lastDuration >= .milliseconds(200))
                let statistics = Self.statistics(server)
                #expect(statistics.authenticationFailures == 3)
                #expect(statistics.delayedAuthentications == 2)
            }
        }
    }
}
