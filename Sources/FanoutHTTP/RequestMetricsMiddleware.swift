internal import CoreMetrics
internal import FanoutCore
internal import Hummingbird

/// The HTTP front's requests in the same metrics as the TCP listener's (docs/operations.md):
/// `fanout_requests_total{listener="http", operation, status}` and
/// `fanout_request_duration_seconds{listener="http", operation}`, the operation being the method
/// and the route (`POST /v1/projects/{project}/messages:send`; `unknown` for a path no route
/// takes) and the status Google's name for the HTTP status (`OK`, `NOT_FOUND`, ...). Outermost,
/// so that it sees the answers the error middleware makes too.
struct RequestMetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    let handles: Handles

    init(factory: any MetricsFactory) {
        self.handles = Handles(factory: factory)
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let started = ContinuousClock.now
        let response = try await next(request, context)
        let operation = context.endpointPath.map { "\(request.method) \($0)" } ?? "unknown"
        self.handles.answered(operation, status: response.status.code, after: ContinuousClock.now - started)
        return response
    }

    /// The counters and timers, made once per (operation, status).
    final class Handles: Sendable {
        private let factory: any MetricsFactory
        private let counters = MetricsHandles<String, Counter>()
        private let timers = MetricsHandles<String, Timer>()

        init(factory: any MetricsFactory) {
            self.factory = factory
        }

        func answered(_ operation: String, status: Int, after duration: Duration) {
            let name = Self.statusName(status)
            self.counters.handle("\(operation) \(name)") {
                Counter(label: "fanout_requests_total", dimensions: [("listener", "http"), ("operation", operation), ("status", name)], factory: self.factory)
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
}
