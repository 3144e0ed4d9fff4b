public import FanoutModel
public import FanoutWire
public import NIOCore
public import NIOPosix
internal import NIOSSL

/// An async client of `fanoutd` (docs/wire-protocol.md). One connection, any number of
/// concurrent calls: calls from many tasks are pipelined on it and their replies matched by
/// request id. Reconnecting is left to the caller.
///
/// ```swift
/// let client = try await FanoutClient.connect(host: "127.0.0.1", port: 7400, apiKey: key)
/// let results = try await client.subscribe(tokens, to: "news")
/// let receipt = try await client.send(#"{"message":{"topic":"news","data":{"k":"v"}}}"#)
/// try await client.close()
/// ```
/// Engine errors are thrown as `FanoutError` with the server's status, message and field. A call
/// whose task is cancelled throws `CancellationError` without waiting for its reply (a request
/// already written may still be applied by the server).
public final class FanoutClient: Sendable {
    private let connection: ClientConnection
    /// The limits the server announced.
    public let welcome: Welcome

    private init(connection: ClientConnection, welcome: Welcome) {
        self.connection = connection
        self.welcome = welcome
    }

    /// Connects with an API key and says HELLO.
    /// - Throws: `FanoutError` `UNAUTHENTICATED` for a key the server refuses, or the connect error
    ///   (a TLS handshake that fails included).
    public static func connect(
        host: String,
        port: Int,
        apiKey: String,
        role: Hello.Role = .admin,
        tls: TLS? = nil,
        clientName: String = "FanoutClient",
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> FanoutClient {
        try await Self.connect(
            host: host, port: port, credential: .apiKey(Array(apiKey.utf8)), role: role, tls: tls,
            clientName: clientName, eventLoopGroup: eventLoopGroup
        )
    }

    /// Connects with any credential (an API key, an installation's auth or refresh token) and says HELLO.
    public static func connect(
        host: String,
        port: Int,
        credential: Hello.Credential,
        role: Hello.Role,
        tls: TLS? = nil,
        clientName: String = "FanoutClient",
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> FanoutClient {
        let sslContext = try tls.map { try NIOSSLContext(configuration: $0.configuration) }
        let serverHostname = tls.map { $0.serverHostname ?? host }
        let (connection, handshake) = try await ClientBootstrap(group: eventLoopGroup)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelOption(.recvAllocator, value: AdaptiveRecvByteBufferAllocator.frames)
            .connect(host: host, port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    var handshake: EventLoopFuture<Void>?
                    if let sslContext {
                        // SNI takes names only: an IP address is verified against the certificate's IP SANs.
                        let name = serverHostname.flatMap { TLS.isIPAddress($0) ? nil : $0 }
                        let promise = channel.eventLoop.makePromise(of: Void.self)
                        try pipeline.addHandler(try NIOSSLClientHandler(context: sslContext, serverHostname: name))
                        try pipeline.addHandler(TLSHandshakeWaiter(promise: promise))
                        handshake = promise.futureResult
                    }
                    let handler = ClientHandler()
                    try pipeline.addHandler(handler)
                    return (ClientConnection(channel: channel, handler: NIOLoopBound(handler, eventLoop: channel.eventLoop)), handshake)
                }
            }
        if let handshake {
            do {
                try await handshake.get()
            } catch {
                try? await connection.channel.close()
                throw error
            }
        }
        let hello = Hello(role: role, credential: credential, clientName: String(clientName.utf8.prefix(Hello.maximumClientNameLength)) ?? "")
        let reply: ServerMessage
        do {
            reply = try await Self.request(.hello(hello), on: connection)
        } catch {
            try? await connection.channel.close()
            throw error
        }
        guard case .welcome(let welcome) = reply else {
            try? await connection.channel.close()
            throw FanoutError(.internal, "the server answered HELLO with \(reply.opcode)")
        }
        return FanoutClient(connection: connection, welcome: welcome)
    }

    /// Closes the connection; calls still waiting fail with `UNAVAILABLE`.
    public func close() async throws {
        do {
            try await self.connection.channel.close()
        } catch ChannelError.alreadyClosed {
        }
    }

    /// Sends any request and returns the reply; an ERROR reply is thrown as `FanoutError`.
    public func request(_ request: ClientRequest) async throws -> ServerMessage {
        try await Self.request(request, on: self.connection)
    }

    /// Sends a request encoded ahead (`EncodedRequest`, which can be sent any number of times)
    /// and returns the reply; an ERROR reply is thrown as `FanoutError`.
    public func request(_ encoded: EncodedRequest) async throws -> ServerMessage {
        try Self.throwingError(try await self.connection.request(encoded))
    }

    private static func request(
        _ request: ClientRequest,
        on connection: ClientConnection,
        deliveries: DeliveryStream? = nil
    ) async throws -> ServerMessage {
        try Self.throwingError(try await connection.request(request, deliveries: deliveries))
    }

    /// A reply, or its error thrown when it is an ERROR reply.
    private static func throwingError(_ message: ServerMessage) throws -> ServerMessage {
        if case .error(let error) = message {
            throw error
        }
        return message
    }

    /// A failed write as the client reports it: `UNAVAILABLE`, unless it is a `FanoutError` already.
    static func connectionError(_ error: any Error) -> FanoutError {
        if let error = error as? FanoutError { return error }
        if let error = error as? ProtocolError { return error.fanoutError }
        return FanoutError(.unavailable, "the connection is closed (\(error))")
    }

    /// Sends a request and extracts the reply's value; a reply of another shape is `INTERNAL`.
    private func request<Value>(_ request: ClientRequest, _ extract: (ServerMessage) -> Value?) async throws -> Value {
        let reply = try await self.request(request)
        guard let value = extract(reply) else {
            throw FanoutError(.internal, "the server answered \(request.opcode) with \(reply.opcode)")
        }
        return value
    }

    // MARK: - Projects

    public func ping() async throws {
        _ = try await self.request(.ping)
    }

    public func createProject(_ project: String) async throws {
        _ = try await self.request(.createProject(project: project))
    }

    public func deleteProject(_ project: String) async throws {
        _ = try await self.request(.deleteProject(project: project))
    }

    /// The projects the key may use.
    public func listProjects() async throws -> [String] {
        try await self.names(.listProjects)
    }

    /// Writes a snapshot of every project now (a key for all projects only); returns its file's name
    /// (on a cluster node, the first shard's: `snapshotFiles()` has them all).
    public func snapshot() async throws -> String {
        try await self.request(.snapshot) { if case .names(_, let names) = $0, let name = names.first { name } else { nil } }
    }

    /// Writes a snapshot now, as `snapshot()`; returns every file written: one for a fanoutd, one per
    /// shard for a cluster node (`shard-N/<name>`).
    public func snapshotFiles() async throws -> [String] {
        try await self.request(.snapshot) { if case .names(_, let names) = $0 { names } else { nil } }
    }

    // MARK: - Installation credentials

    /// Gives an installation (FID or token) new credentials: a refresh token (shown only now; the
    /// server keeps its hash) and a first auth token. The credentials it had stop working.
    public func issueCredentials(for registration: String, in project: String = "default") async throws -> InstallationCredentials {
        try await self.request(.issueCredentials(project: project, registration: registration)) {
            if case .credentials(let credentials) = $0 { credentials } else { nil }
        }
    }

    /// A new auth token for an installation: on a connection opened with its refresh token, or by an admin.
    public func generateAuthToken(for fid: String, in project: String = "default") async throws -> AuthToken {
        try await self.request(.generateAuthToken(project: project, fid: fid)) {
            if case .authToken(let token) = $0 { token } else { nil }
        }
    }

    /// The public keys that verify auth tokens, as a JWK Set (JSON text).
    public func jwks() async throws -> String {
        try await self.request(.jwks) { if case .names(_, let names) = $0, let json = names.first { json } else { nil } }
    }

    /// Makes a new signing key current (a key for all projects only); returns its id (`kid`).
    public func rotateSigningKey() async throws -> String {
        try await self.request(.rotateSigningKey) { if case .names(_, let names) = $0, let id = names.first { id } else { nil } }
    }

    // MARK: - Installations

    public func register(_ fields: RegistrationFields, in project: String = "default") async throws -> RegistrationResult {
        return try await self.request(.register(project: project, fields)) { if case .registered(let result) = $0 { result } else { nil } }
    }

    /// Registers an installation and answers its new credentials too (REGISTER with the credentials
    /// option), as Firebase Installations' create does: the refresh token is shown only here. An
    /// app key may register this way only, and only installations that do not exist yet.
    public func registerWithCredentials(
        _ fields: RegistrationFields,
        in project: String = "default"
    ) async throws -> (result: RegistrationResult, credentials: InstallationCredentials) {
        try await self.request(.register(project: project, fields, issuingCredentials: true)) {
            if case .registeredWithCredentials(let result, let credentials) = $0 { (result, credentials) } else { nil }
        }
    }

    /// Registers up to 1000 installations in one request (REGISTER_BATCH): one outcome per item,
    /// in order, each item checked and applied on its own (a refused item does not stop the others).
    public func register(_ batch: [RegistrationFields], in project: String = "default") async throws -> [RegistrationOutcome] {
        try await self.request(.registerBatch(project: project, batch)) { if case .registeredBatch(let outcomes) = $0 { outcomes } else { nil } }
    }

    /// Registers up to 1000 installations in one request as `register(_:in:)` does, answered with
    /// each registered item's FID and flags only (REGISTER_BATCH_FIDS): for imports, which sent
    /// everything else the installation holds. One receipt per item, in order.
    public func registerReturningFIDs(_ batch: [RegistrationFields], in project: String = "default") async throws -> [RegistrationReceipt] {
        try await self.request(.registerBatchFIDs(project: project, batch)) { if case .registeredFIDs(let receipts) = $0 { receipts } else { nil } }
    }

    public func refreshToken(_ registration: String, to token: String, in project: String = "default") async throws -> Installation {
        try await self.installation(.refreshToken(project: project, registration: registration, token: token))
    }

    /// Sets an iOS installation's APNs device token (hex), or clears it with `nil`; an installation
    /// that had the token loses it.
    public func setAPNsToken(_ apnsToken: String?, of registration: String, in project: String = "default") async throws -> Installation {
        try await self.installation(.setAPNsToken(project: project, registration: registration, apnsToken: apnsToken))
    }

    /// The installation an APNs device token (hex) belongs to.
    public func installation(forAPNsToken apnsToken: String, in project: String = "default") async throws -> Installation {
        try await self.installation(.installationByAPNsToken(project: project, apnsToken: apnsToken))
    }

    public func touch(_ registration: String, in project: String = "default") async throws -> Installation {
        try await self.installation(.touch(project: project, registration: registration))
    }

    public func installation(_ registration: String, in project: String = "default") async throws -> Installation {
        try await self.installation(.getInstallation(project: project, registration: registration))
    }

    /// Deletes an installation; returns what it was.
    @discardableResult
    public func deleteInstallation(fid: String, in project: String = "default") async throws -> Installation {
        try await self.installation(.deleteInstallation(project: project, fid: fid))
    }

    /// How many installations are stale, and the `limit` least recently seen of them.
    public func staleInstallations(limit: Int = 100, in project: String = "default") async throws -> (total: Int, installations: [Installation]) {
        return try await self.request(.staleInstallations(project: project, limit: UInt32(clamping: limit))) { if case .staleInstallations(let total, let installations) = $0 { (Int(clamping: total), installations) } else { nil } }
    }

    public func pruneExpiredInstallations(in project: String = "default") async throws -> Int {
        try await self.count(.pruneExpired(project: project))
    }

    public func installationCount(in project: String = "default") async throws -> Int {
        try await self.count(.installationCount(project: project))
    }

    // MARK: - Users

    public func bindDevice(_ registration: String, to user: String, anonymous: Bool = false, in project: String = "default") async throws -> Installation {
        try await self.installation(.bindDevice(project: project, registration: registration, user: user, anonymous: anonymous))
    }

    public func signOut(_ user: String, on registration: String, in project: String = "default") async throws -> Installation {
        try await self.installation(.signOut(project: project, user: user, registration: registration))
    }

    public func linkUser(anonymous: String, to permanent: String, in project: String = "default") async throws -> User {
        try await self.user(.linkUser(project: project, anonymous: anonymous, permanent: permanent))
    }

    public func user(_ user: String, in project: String = "default") async throws -> User {
        try await self.user(.getUser(project: project, user: user))
    }

    public func cleanUpAnonymousUsers(in project: String = "default", dryRun: Bool = false) async throws -> [String] {
        try await self.names(.cleanUpAnonymousUsers(project: project, dryRun: dryRun))
    }

    /// The project's users in id order after `startAfter` (empty: from the first), at most `limit` (1...1000).
    public func users(after startAfter: String = "", limit: Int = 1000, in project: String = "default") async throws -> [UserSummary] {
        try await self.request(.listUsers(project: project, startAfter: startAfter, limit: UInt32(clamping: limit))) {
            if case .users(let users) = $0 { users } else { nil }
        }
    }

    /// Lets the project accept legacy 11-character Instance IDs as FIDs (registrations' offered
    /// FIDs, sends' `fid` and `fids`), or stops it.
    public func setLegacyInstanceIDs(_ accepted: Bool, in project: String = "default") async throws {
        _ = try await self.request(.setLegacyInstanceIDs(project: project, accepted: accepted))
    }

    /// Turns the project's automatic anonymous clean-up on or off; returns since when it is on.
    public func setAnonymousCleanUp(_ enabled: Bool, in project: String = "default") async throws -> Timestamp? {
        try await self.request(.setAnonymousCleanUp(project: project, enabled: enabled)) {
            if case .anonymousCleanUp(let since) = $0 { since } else { nil }
        }
    }

    // MARK: - Topics

    /// Subscribes up to 1000 registrations (FIDs or tokens); one result per registration.
    public func subscribe(_ registrations: [String], to topic: String, in project: String = "default") async throws -> [BatchItemResult] {
        try await self.subscribe(RegistrationList(registrations), to: topic, in: project)
    }

    /// Subscribes registrations already packed into one list (an import that reads its tokens as
    /// bytes keeps no `String` per token).
    public func subscribe(_ registrations: RegistrationList, to topic: String, in project: String = "default") async throws -> [BatchItemResult] {
        try await self.itemResults(.subscribe(project: project, topic: topic, registrations: registrations))
    }

    public func unsubscribe(_ registrations: [String], from topic: String, in project: String = "default") async throws -> [BatchItemResult] {
        try await self.itemResults(.unsubscribe(project: project, topic: topic, registrations: RegistrationList(registrations)))
    }

    public func topics(of registration: String, in project: String = "default") async throws -> [String] {
        try await self.names(.topicsOf(project: project, registration: registration))
    }

    /// A page of topics sorted by name, after `startAfter`; fewer than `limit` means the last page.
    public func listTopics(after startAfter: String = "", limit: Int = 1000, in project: String = "default") async throws -> [TopicCount] {
        return try await self.request(.listTopics(project: project, startAfter: startAfter, limit: UInt32(clamping: limit))) { if case .topics(let topics) = $0 { topics } else { nil } }
    }

    public func subscriberCount(of topic: String, in project: String = "default") async throws -> Int {
        try await self.count(.subscriberCount(project: project, topic: topic))
    }

    /// How many installations a topic, a condition or a user reaches now.
    public func audience(_ target: AudienceTarget, in project: String = "default") async throws -> Int {
        try await self.count(.audience(project: project, target))
    }

    // MARK: - Sends and deliveries

    /// Sends an FCM HTTP v1 body (`{"message": {...}}` or a bare message). `skipStale` skips
    /// installations not seen for the server's stale age.
    public func send(_ body: [UInt8], in project: String = "default", skipStale: Bool = false) async throws -> SendReceipt {
        try await self.request(.send(project: project, body: body, skipStale: skipStale)) { if case .sent(let receipt) = $0 { receipt } else { nil } }
    }

    public func send(_ json: String, in project: String = "default", skipStale: Bool = false) async throws -> SendReceipt {
        try await self.send(Array(json.utf8), in: project, skipStale: skipStale)
    }

    public func pendingDeliveries(for registration: String, in project: String = "default") async throws -> [WireDelivery] {
        return try await self.request(.pending(project: project, registration: registration)) { if case .pending(let deliveries) = $0 { deliveries } else { nil } }
    }

    public func expireDeliveries(in project: String = "default") async throws -> Int {
        try await self.count(.expireDeliveries(project: project))
    }

    public func statistics(in project: String = "default") async throws -> ProjectStatistics {
        return try await self.request(.stats(project: project)) { if case .stats(let statistics) = $0 { statistics } else { nil } }
    }

    /// Attaches this connection as a consumer (one attachment per connection) and returns its
    /// deliveries: the backlog first, then new ones, never more than `credit` unacknowledged.
    /// The stream ends after `detach`, and throws when the connection is lost; `nextBatch` takes
    /// what has arrived at once, to acknowledge it with one ACK.
    ///
    /// `grouped` (the default) attaches with ATTACH_GROUPED: the server sends each message's
    /// envelope (headers, payload) once for many recipients, and the stream yields the same
    /// deliveries as with ATTACH (`grouped: false`, for a server older than ATTACH_GROUPED).
    public func attach(_ scope: AttachScope, credit: Int, in project: String = "default", grouped: Bool = true) async throws -> DeliveryStream {
        let stream = DeliveryStream()
        let request = ClientRequest.attach(project: project, scope: scope, credit: UInt32(clamping: credit), grouped: grouped)
        _ = try await Self.request(request, on: self.connection, deliveries: stream)
        return stream
    }

    /// Raises the attachment's credit.
    public func grant(_ credit: Int) async throws {
        _ = try await self.request(.grant(credit: UInt32(clamping: credit)))
    }

    /// Acknowledges deliveries; returns how many were still pending. Returns once durable.
    @discardableResult
    public func acknowledge(_ ids: [DeliveryID]) async throws -> Int {
        try await self.count(.acknowledge(ids))
    }

    /// Ends the attachment; what it holds unacknowledged goes to the next consumer.
    public func detach() async throws {
        _ = try await self.request(.detach)
    }

    // MARK: - Reply shapes

    private func names(_ request: ClientRequest) async throws -> [String] {
        return try await self.request(request) { if case .names(_, let names) = $0 { names } else { nil } }
    }

    private func installation(_ request: ClientRequest) async throws -> Installation {
        return try await self.request(request) { if case .installation(_, let installation) = $0 { installation } else { nil } }
    }

    private func user(_ request: ClientRequest) async throws -> User {
        return try await self.request(request) { if case .user(_, let user) = $0 { user } else { nil } }
    }

    private func count(_ request: ClientRequest) async throws -> Int {
        return try await self.request(request) { if case .count(_, let count) = $0 { Int(clamping: count) } else { nil } }
    }

    private func itemResults(_ request: ClientRequest) async throws -> [BatchItemResult] {
        return try await self.request(request) { if case .itemResults(_, let results) = $0 { results } else { nil } }
    }
}
