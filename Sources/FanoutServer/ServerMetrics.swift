public import CoreMetrics
internal import FanoutModel
internal import FanoutWire
internal import FanoutCore

/// The TCP listener's metrics (docs/operations.md): requests by operation and status, their
/// latency, and the open connections by role. The handles are made once per (operation, status)
/// and shared by every connection, so a request costs a lookup and two atomic adds.
final class ServerMetrics: Sendable {
    private let factory: any MetricsFactory
    private let requests = MetricsHandles<UInt32, Counter>()
    private let latencies = MetricsHandles<UInt8, Timer>()
    private let connections = MetricsHandles<Permissions.Principal, Meter>()

    init(factory: any MetricsFactory) {
        self.factory = factory
    }

    /// A request answered (refused with `error`, if it was) after `nanoseconds`.
    func answered(_ opcode: Opcode, error: FanoutError.Code?, nanoseconds: Int64) {
        let key = UInt32(opcode.rawValue) << 8 | UInt32(error?.wireValue ?? 0)
        self.requests.handle(key) {
            Counter(
                label: "fanout_requests_total",
                dimensions: [("listener", "tcp"), ("operation", opcode.name), ("status", error?.name ?? "OK")],
                factory: self.factory
            )
        }.increment()
        self.latencies.handle(opcode.rawValue) {
            Timer(label: "fanout_request_duration_seconds", dimensions: [("listener", "tcp"), ("operation", opcode.name)], factory: self.factory)
        }.recordNanoseconds(nanoseconds)
    }

    /// A connection was welcomed (`opened`) or, once welcomed, closed.
    func connection(_ role: Permissions.Principal, opened: Bool) {
        let meter = self.connections.handle(role) {
            Meter(label: "fanout_connections", dimensions: [("role", role.description)], factory: self.factory)
        }
        if opened { meter.increment() } else { meter.decrement() }
    }
}
