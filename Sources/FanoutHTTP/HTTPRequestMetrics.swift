internal import CoreMetrics
internal import FanoutCore

/// The HTTP front's request counters and timers, made once per (operation, status): shared by the
/// router's middleware and `MessagesSendHandler`.
final class HTTPRequestMetrics: Sendable {
    /// A counter's key: no string is built per request to find it.
    private struct Answer: Hashable, Sendable {
        let operation: String
        let status: String
    }

    private let factory: any MetricsFactory
    private let counters = MetricsHandles<Answer, Counter>()
    private let timers = MetricsHandles<String, Timer>()

    init(factory: any MetricsFactory) {
        self.factory = factory
    }

    func answered(_ operation: String, status: Int, after duration: Duration) {
        let name = Self.statusName(status)
        self.counters.handle(Answer(operation: operation, status: name)) {
            Counter(
                label: "fanout_requests_total",
                dimensions: [("listener", "http"), ("operation", operation), ("status", name)],
                factory: self.factory
            )
        }.increment()
        self.timers.handle(operation) {
            Timer(label: "fanout_request_duration_seconds", dimensions: [("listener", "http"), ("operation", operation)], factory: self.factory)
        }.recordNanoseconds(duration.nanoseconds)
    }

    /// Google's status name for an HTTP status, as the TCP listener's status label spells it.
    static func statusName(_ code: Int) -> String {
        switch code {
        case 200..<300: return "OK"
        case 400: return "INVALID_ARGUMENT"
        case 401: return "UNAUTHENTICATED"
        case 403: return "PERMISSION_DENIED"
        case 404: return "NOT_FOUND"
        case 409: return "ALREADY_EXISTS"
        case 429: return "RESOURCE_EXHAUSTED"
        case 503: return "UNAVAILABLE"
        default: return code < 500 ? "INVALID_ARGUMENT" : "INTERNAL"
        }
    }
}
