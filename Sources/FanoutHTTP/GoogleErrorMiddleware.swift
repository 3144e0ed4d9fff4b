internal import FanoutCore
internal import Hummingbird

/// What the router itself refuses (an unknown path, a method a path does not take, a body too
/// large, a malformed request) answered in Google's error shape too, like every other error.
struct GoogleErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as any HTTPResponseError {
            return HTTPFront.error(Self.fanoutError(status: error.status, method: request.method, path: request.uri.path))
        }
    }

    static func fanoutError(status: HTTPResponse.Status, method: HTTPRequest.Method, path: String) -> FanoutError {
        switch status.code {
        case 404: return FanoutError(.notFound, "no endpoint \(method) \(path) (docs/http-api.md lists them)")
        case 405: return FanoutError(.notFound, "\(path) does not take \(method)")
        case 413: return FanoutError(.invalidArgument, "the request body is too large", field: "body")
        case 401: return FanoutError(.unauthenticated, "Request had invalid authentication credentials.")
        case 400..<500: return FanoutError(.invalidArgument, "the request is malformed (\(status.code))")
        default: return FanoutError(.internal, "the request could not be answered (\(status.code))")
        }
    }
}
