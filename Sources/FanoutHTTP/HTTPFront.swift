public import FanoutCore
public import FanoutKeys
internal import FanoutWire
internal import HTTPTypes
public import Hummingbird
public import HummingbirdCore
public import NIOCore
public import Prometheus
public import CoreMetrics

/// fanoutd's HTTP listener (docs/http-api.md), on Hummingbird 2: FCM's HTTP v1 send and topic
/// management, so that an unmodified firebase-admin SDK can send through fanoutd; Firebase
/// Installations' create, auth token and delete calls; health and readiness; the JWK Set that
/// verifies installation auth tokens. Requests authenticate with `Authorization: Bearer <API key>`
/// or `x-goog-api-key` (the key's role and projects, as on the TCP listener), or for an
/// installation's own calls with `Authorization: FIS_v2 <refresh token>`.
public struct HTTPFront: Sendable {
    /// The largest request body read (FCM's send limit plus the envelope).
    public static let maximumBodySize = 1 << 20 + 4096

    let backend: any HTTPFrontBackend
    /// The engine when the front serves one: it takes sends on the event loop (`channelHandlers()`,
    /// `http1()`) and serves Firebase Installations' calls.
    let engine: Engine?
    let keys: @Sendable () -> APIKeyStore
    /// What issues installation credentials (Firebase Installations' calls, the JWK Set); nil: none.
    let credentials: (any InstallationCredentialsBackend)?
    let metrics: PrometheusCollectorRegistry?
    let requestMetrics: HTTPRequestMetrics

    /// A front serving `engine` with the keys `keys()` returns at each request (so that a SIGHUP
    /// reload applies), when given `tokens`' credentials and JWK Set, and when given `metrics`,
    /// that registry at `GET /metrics` in Prometheus's text format. Requests are counted with the
    /// engine's metrics factory. `credentialsChanged(project)` runs after a call deleted an
    /// installation or replaced its credentials, so that open device connections elsewhere (the
    /// TCP listener's) check theirs at once.
    public init(
        engine: Engine,
        keys: @escaping @Sendable () -> APIKeyStore,
        tokens: InstallationTokens?,
        metrics: PrometheusCollectorRegistry? = nil,
        credentialsChanged: @escaping @Sendable (ProjectID) -> Void = { _ in }
    ) {
        self.backend = engine
        self.engine = engine
        self.keys = keys
        self.credentials = tokens.map { EngineInstallationCredentials(engine: engine, tokens: $0, credentialsChanged: credentialsChanged) }
        self.metrics = metrics
        self.requestMetrics = HTTPRequestMetrics(factory: engine.metrics.factory)
    }

    /// A front serving FCM's send and topic management through `backend` (a cluster node's
    /// routing), Firebase Installations' calls and the JWK Set through `credentials` (without,
    /// they are refused: `FAILED_PRECONDITION`, and 404), its requests counted with
    /// `metricsFactory`, and when given `metrics`, that registry at `GET /metrics`.
    public init(
        backend: any HTTPFrontBackend,
        credentials: (any InstallationCredentialsBackend)? = nil,
        keys: @escaping @Sendable () -> APIKeyStore,
        metrics: PrometheusCollectorRegistry? = nil,
        metricsFactory: any MetricsFactory
    ) {
        self.backend = backend
        self.engine = nil
        self.keys = keys
        self.credentials = credentials
        self.metrics = metrics
        self.requestMetrics = HTTPRequestMetrics(factory: metricsFactory)
    }

    /// The channel handlers for Hummingbird's channels on HTTP types' parts (`http2Upgrade`'s
    /// streams and its HTTP/1.1 over TLS, through `additionalChannelHandlers`), made for each: with
    /// an engine they serve `messages:send` on the event loop and pass every other request to the
    /// router; through a backend, there are none (the router serves every request).
    public func channelHandlers() -> [any RemovableChannelHandler] {
        guard let engine = self.engine else { return [] }
        return [MessagesSendHandler<HTTPTypesParts>(engine: engine, keys: self.keys, metrics: self.requestMetrics)]
    }

    /// Hummingbird's HTTP/1.1 server, with an engine's `messages:send` served on the event loop on
    /// NIOHTTP1's parts (`FrontHTTP1Channel`).
    public func http1() -> HTTPServerBuilder {
        guard let engine = self.engine else { return .http1() }
        let (keys, metrics) = (self.keys, self.requestMetrics)
        return HTTPServerBuilder { responder in
            FrontHTTP1Channel(responder: responder) {
                MessagesSendHandler<HTTP1Parts>(engine: engine, keys: keys, metrics: metrics)
            }
        }
    }

    /// Every route, `messages:send` included, so that the router alone serves the whole API (the
    /// channel handlers only make the send cheaper).
    public func router() -> Router<BasicRequestContext> {
        let (backend, keys, credentials, metrics) = (self.backend, self.keys, self.credentials, self.metrics)
        let router = Router()
        router.add(middleware: RequestMetricsMiddleware(handles: self.requestMetrics))
        router.add(middleware: GoogleErrorMiddleware())
        router.get("/metrics") { _, _ in
            guard let metrics else { return Self.error(FanoutError(.notFound, "this server exports no metrics")) }
            return Response(
                status: .ok,
                headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: metrics.emitToBuffer()))
            )
        }
        router.get("/healthz") { _, _ in Self.json(200, #"{"status":"ok"}"#) }
        router.get("/readyz") { _, _ in
            backend.isReady ? Self.json(200, #"{"status":"ready"}"#) : Self.json(503, #"{"status":"the log refuses changes"}"#)
        }
        router.get("/.well-known/jwks.json") { _, _ in
            guard let credentials, let jwks = try? await credentials.jwks() else {
                return Self.error(FanoutError(.notFound, "this server issues no installation credentials"))
            }
            return Self.json(200, jwks)
        }
        router.post("/v1/projects/:project/messages:send") { request, context in
            do throws(FanoutError) {
                let project = try MessagesSend.authorize(
                    project: context.parameters.get("project"),
                    authorization: request.headers[.authorization],
                    googleAPIKey: request.headers[Self.googleAPIKey],
                    keys: keys()
                )
                let body = try await Self.body(request)
                let sent = try await backend.sendMessage(body, in: project)
                return Self.json(200, MessagesSend.body(name: try MessagesSend.name(sent.messageID, recipients: sent.recipients)))
            } catch {
                return Self.error(error)
            }
        }
        Self.addTopicRoutes(to: router, backend: backend, keys: keys)
        Self.addInstallationRoutes(to: router, credentials: credentials, keys: keys)
        return router
    }

    // MARK: - Pieces

    static func project(_ value: String?) throws(FanoutError) -> ProjectID {
        guard let value, let project = ProjectID(value) else {
            throw FanoutError(.invalidArgument, "the project in the path is not valid", field: "project")
        }
        return project
    }

    /// The header Google's APIs take an API key in (the Firebase SDKs send the app's key so).
    static let googleAPIKey = HTTPField.Name("x-goog-api-key")!

    /// The request's API key (`Authorization: Bearer`, or `x-goog-api-key`): one of the server's,
    /// of one of `roles`.
    static func apiKey(of headers: HTTPFields, keys: APIKeyStore, roles: Set<Hello.Role>) throws(FanoutError) -> APIKey {
        try Self.apiKey(authorization: headers[.authorization], googleAPIKey: headers[Self.googleAPIKey], keys: keys, roles: roles)
    }

    /// The API key presented in `authorization` (`Bearer <key>`) or else in `googleAPIKey` (the
    /// headers' values): one of the server's, of one of `roles`.
    static func apiKey(authorization: String?, googleAPIKey: String?, keys: APIKeyStore, roles: Set<Hello.Role>) throws(FanoutError) -> APIKey {
        let presented: [UInt8]
        if let header = authorization?.utf8, header.starts(with: Self.bearer) {
            presented = Array(header.dropFirst(Self.bearer.count))
        } else if let header = googleAPIKey {
            presented = Array(header.utf8)
        } else {
            throw FanoutError(.unauthenticated, "Request is missing required authentication credential: Authorization: Bearer <API key>")
        }
        guard let key = keys.authenticate(presented) else {
            throw FanoutError(.unauthenticated, "Request had invalid authentication credentials.")
        }
        guard roles.contains(key.role) else {
            throw FanoutError(.permissionDenied, "a \(key.role) key may not do this")
        }
        return key
    }

    private static let bearer = Array("Bearer ".utf8)

    /// The request's API key must be one of the server's, of one of `roles`, covering `project`.
    static func authorize(_ headers: HTTPFields, keys: APIKeyStore, project: ProjectID, roles: Set<Hello.Role>) throws(FanoutError) {
        try Self.authorize(Self.apiKey(of: headers, keys: keys, roles: roles), project: project)
    }

    /// `key` must cover `project`.
    static func authorize(_ key: APIKey, project: ProjectID) throws(FanoutError) {
        guard key.projects.contains(project.value) else {
            throw FanoutError(.permissionDenied, "the key does not cover project \(project.value)", field: "project")
        }
    }

    static func body(_ request: Request) async throws(FanoutError) -> [UInt8] {
        do {
            let buffer = try await request.body.collect(upTo: Self.maximumBodySize)
            return Array(buffer.readableBytesView)
        } catch {
            throw Self.bodyTooLarge
        }
    }

    static let bodyTooLarge = FanoutError(.invalidArgument, "the request body is larger than \(Self.maximumBodySize) bytes or could not be read", field: "body")

    static func json(_ status: Int, _ text: String) -> Response {
        Self.json(status, Array(text.utf8))
    }

    static func json(_ status: Int, _ bytes: [UInt8]) -> Response {
        Response(
            status: HTTPResponse.Status(code: status),
            headers: [.contentType: "application/json; charset=UTF-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes))
        )
    }

    static func error(_ error: FanoutError) -> Response {
        let (status, body) = GoogleError.body(error)
        var response = Self.json(status, body)
        response.headers[.retryAfter] = GoogleError.retryAfter(error)
        return response
    }
}
