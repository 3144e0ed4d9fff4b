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
    let handles: HTTPRequestMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let started = ContinuousClock.now
        let response = try await next(request, context)
        let operation = context.endpointPath.map { "\(request.method) \($0)" } ?? "unknown"
        self.handles.answered(operation, status: response.status.code, after: ContinuousClock.now - started)
        return response
    }
}
