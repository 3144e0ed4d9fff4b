public import CoreMetrics
internal import FanoutModel
internal import FanoutWire
import Synchronization

/// The TCP listener's metrics (docs/operations.md): requests by operation and status, their
/// latency, and the open connections by role. The handles are made once per (operation, status)
/// and shared by every connection, so a request costs a lookup and two atomic adds.
final class ServerMetrics: Sendable {
    private let factory: any MetricsFactory
    private let requests = Mutex<[UInt32: Counter]>([:])
    private let latencies = Mutex<[UInt8: Timer]>([:])
    private let connections = Mutex<[Permissions.Principal: Meter]>([:])

    init(factory: any MetricsFactory) {
        self.factory = factory
    }

    /// A request answered (refused with `error`, if it was) after `nanoseconds`.
    func answered(_ opcode: Opcode, error: FanoutError.Code?, nanoseconds: Int64) {
        let key = UInt32(opcode.rawValue) << 8 | UInt32(error?.wireValue ?? 0)
        let counter = self.requests.withLock { counters in
            if let counter = counters[key] { return counter }
            let counter = Counter(
                label: "fanout_requests_total",
                dimensions: [("listener", "tcp"), ("operation", opcode.name), ("status", error?.name ?? "OK")],
                factory: self.factory
            )
            counters[key] = counter
            return counter
        }
        counter.increment()
        let timer = self.latencies.withLock { timers in
            if let timer = timers[opcode.rawValue] { return timer }
            let timer = Timer(label: "fanout_request_duration_seconds", dimensions: [("listener", "tcp"), ("operation", opcode.name)], factory: self.factory)
            timers[opcode.rawValue] = timer
            return timer
        }
        timer.recordNanoseconds(nanoseconds)
    }

    /// A connection was welcomed (`opened`) or, once welcomed, closed.
    func connection(_ role: Permissions.Principal, opened: Bool) {
        let meter = self.connections.withLock { meters in
            if let meter = meters[role] { return meter }
            let meter = Meter(label: "fanout_connections", dimensions: [("role", role.description)], factory: self.factory)
            meters[role] = meter
            return meter
        }
        if opened { meter.increment() } else { meter.decrement() }
    }
}
