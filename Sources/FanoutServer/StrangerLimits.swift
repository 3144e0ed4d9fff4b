internal import FanoutModel
internal import FanoutWire
internal import NIOCore

/// What keeps strangers from exhausting the server (docs/security.md): connections that have not
/// finished HELLO are capped, must finish it within a deadline, and a failed authentication is
/// answered later the more often its address failed lately. Counted for STATS.
final class StrangerLimits: Sendable {
    struct Configuration: Sendable {
        var handshakeTimeout: TimeAmount
        var maximumPendingHandshakes: Int
        /// The delay after an address's first failure; it doubles with each failure in `failureWindow`, up to `maximumFailureDelay`.
        var failureDelay: TimeAmount = .milliseconds(100)
        var maximumFailureDelay: TimeAmount = .seconds(5)
        var failureWindow: TimeAmount = .seconds(60)
    }

    private struct State {
        var pending = 0
        var failures: [String: (count: Int, last: NIODeadline)] = [:]
        var statistics = ConnectionStatistics()
    }

    let configuration: Configuration
    private let state = Locked(State())

    init(_ configuration: Configuration) {
        self.configuration = configuration
    }

    var statistics: ConnectionStatistics { self.state.withLock { $0.statistics } }

    /// A new connection, before HELLO: false (and counted) when too many wait already.
    func admit() -> Bool {
        self.state.withLock { state in
            state.statistics.accepted += 1
            guard state.pending < self.configuration.maximumPendingHandshakes else {
                state.statistics.refusedOverPendingLimit += 1
                return false
            }
            state.pending += 1
            return true
        }
    }

    /// The connection finished HELLO or closed before it.
    func handshakeEnded() {
        self.state.withLock { $0.pending -= 1 }
    }

    func handshakeTimedOut() {
        self.state.withLock { $0.statistics.handshakeTimeouts += 1 }
    }

    /// Records a failed authentication from `address`; returns how long to wait before answering it.
    func authenticationFailed(from address: String) -> TimeAmount {
        let now = NIODeadline.now()
        return self.state.withLock { state in
            state.statistics.authenticationFailures += 1
            if state.failures.count >= 10_000 {
                state.failures = state.failures.filter { now - $0.value.last < self.configuration.failureWindow }
            }
            var count = 0
            if let previous = state.failures[address], now - previous.last < self.configuration.failureWindow { count = previous.count }
            state.failures[address] = (count + 1, now)
            guard count > 0 else { return .zero }
            state.statistics.delayedAuthentications += 1
            let nanoseconds = self.configuration.failureDelay.nanoseconds << min(count - 1, 16)
            return .nanoseconds(min(nanoseconds, self.configuration.maximumFailureDelay.nanoseconds))
        }
    }
}
