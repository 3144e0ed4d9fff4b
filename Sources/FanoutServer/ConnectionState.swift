internal import FanoutCore
internal import FanoutKeys
internal import FanoutWire

/// The protocol rules of one connection, as a pure state machine (docs/wire-protocol.md sections
/// 4 and 6): the handshake, roles and project permissions, the attachment and its credit, and how
/// the connection ends. It returns what to do; the connection does it (with the engine and the
/// socket) and reports back what the engine decided (`attached`, `granted`). Tested without I/O.
struct ConnectionState {
    enum Action: Equatable {
        /// Answer with this and keep serving.
        case reply(ServerMessage)
        /// Answer with this and close the connection.
        case fail(ServerMessage)
        /// Authorised: apply it to the engine, answer once durable.
        case perform(ClientRequest)
        /// Attach a consumer with this credit, answer, start streaming (DELIVERIES frames when
        /// `grouped`); then call `attached`.
        case attach(project: String, scope: AttachScope, credit: Int, grouped: Bool = false)
        /// Raise the consumer's credit; on success call `granted`.
        case grant(Int)
        /// Acknowledge through the engine, answer once durable.
        case acknowledge([DeliveryID])
        /// Detach the consumer and answer DONE.
        case detach
        /// Write a snapshot off the connection's task, answer when written.
        case snapshot
        /// A device's credential is well formed and signed: check with the engine that its
        /// installation lives with these credentials, then call `verified`.
        case verify(Principal)
    }

    /// How the connection ends once its input has (the replies of what was applied go first).
    struct Ending: Equatable {
        /// Detach the consumer, if there is one.
        var detach: Bool
        /// Then send this and close lingering (a graceful shutdown); nil: just close.
        var goAway: ServerMessage?
    }

    private enum Phase {
        case awaitingHello
        /// A device's credential waits for the engine's word (`verified`).
        case verifying(Principal)
        case ready(Principal)
        case ended
    }

    private var phase = Phase.awaitingHello
    /// The credit the attachment holds, while there is one.
    private(set) var attachedCredit: Int?
    let keys: APIKeyStore
    let welcome: Welcome
    /// Verifies installation auth tokens; nil when the server issues none.
    let tokens: InstallationTokens?
    /// Where auth tokens' expiry is read against.
    let clock: any WallClock

    init(keys: APIKeyStore, welcome: Welcome, tokens: InstallationTokens? = nil, clock: any WallClock = SystemWallClock()) {
        self.keys = keys
        self.welcome = welcome
        self.tokens = tokens
        self.clock = clock
    }

    /// UNIX seconds now.
    var seconds: Int64 { self.clock.now().secondsSinceEpoch }

    /// Who the connection speaks for, once it is known.
    var principal: Principal? {
        if case .ready(let principal) = self.phase { return principal }
        return nil
    }

    /// The key the connection authenticated with, if it did with a key.
    var key: APIKey? {
        if case .key(let key, _)? = self.principal { return key }
        return nil
    }

    /// The engine's word on a device's credential (see `Action.verify`).
    mutating func verified(_ live: Bool) -> Action {
        guard case .verifying(let principal) = self.phase else {
            return .fail(.error(FanoutError(.internal, "no credential waits for verification")))
        }
        guard live else {
            self.phase = .ended
            return .fail(.error(DeviceScope.revoked))
        }
        self.phase = .ready(principal)
        var welcome = self.welcome
        welcome.projects = principal.projects.names
        return .reply(.welcome(welcome))
    }

    /// The keys were reloaded (SIGHUP): when this connection's key is no longer among them as it
    /// was (revoked, or its role or projects changed), how the connection ends.
    func keysReloaded(_ keys: APIKeyStore) -> ServerMessage? {
        guard let key = self.key, !keys.keys.contains(key) else { return nil }
        return .goAway(.unauthenticated, "the API key was revoked or changed")
    }

    private var maximumCredit: Int { Int(self.welcome.maximumCredit) }

    /// The engine attached the consumer with `credit`.
    mutating func attached(credit: Int) {
        self.attachedCredit = credit
    }

    /// The engine raised the consumer's credit by `credit`.
    mutating func granted(_ credit: Int) {
        self.attachedCredit = (self.attachedCredit ?? 0) + credit
    }

    /// The input ended: the peer closed, or the server stopped reading at a frame boundary (a
    /// graceful shutdown, a revoked key), in which case the peer is told `goAway`. Nothing is
    /// received after.
    mutating func inputEnded(goAway: ServerMessage?) -> Ending {
        let ending = Ending(detach: self.attachedCredit != nil, goAway: goAway)
        self.phase = .ended
        self.attachedCredit = nil
        return ending
    }

    mutating func receive(_ request: consuming ClientRequest) -> Action {
        switch self.phase {
        case .ended:
            return .fail(.error(FanoutError(.unavailable, "the connection is closing")))
        case .awaitingHello:
            guard case .hello(let hello) = request else {
                return .fail(.error(FanoutError(.unauthenticated, "the first frame must be HELLO")))
            }
            return self.authenticate(hello)
        case .verifying:
            return .fail(.error(FanoutError(.unauthenticated, "requests before WELCOME")))
        case .ready(let principal):
            if case .hello = request {
                return .fail(.error(FanoutError(.invalidArgument, "HELLO was sent twice")))
            }
            if let expiresAt = principal.expiresAt, self.seconds >= expiresAt {
                self.phase = .ended
                return .fail(.error(FanoutError(.unauthenticated, "the auth token has expired")))
            }
            let kind = principal.kind
            guard Permissions.allows(kind, request.opcode) else {
                return .reply(.error(FanoutError(.permissionDenied, "a \(kind) connection may not send \(request.opcode)")))
            }
            // Not `[.snapshot, .rotateSigningKey].contains(_:)`: that array was an allocation per request.
            if request.opcode == .snapshot || request.opcode == .rotateSigningKey, principal.projects != .all {
                return .reply(.error(FanoutError(.permissionDenied, "\(request.opcode == .snapshot ? "a snapshot" : "the signing key") covers every project: it needs a key for all of them")))
            }
            if let project = request.project, !principal.projects.contains(project) {
                // An installation's credential is valid in its own project only: elsewhere it proves nothing.
                if principal.installation != nil {
                    return .reply(.error(FanoutError(.unauthenticated, "the installation credential is for another project", field: "project")))
                }
                return .reply(.error(FanoutError(.permissionDenied, "the credential does not cover this project", field: "project")))
            }
            // PING touches nothing: answered here, without the engine.
            if case .ping = request { return .reply(.pong) }
            if let action = self.consumerAction(request) { return action }
            return .perform(request)  // moved (`??`'s autoclosure copied it)
        }
    }

    /// The actions of the attachment and of SNAPSHOT; nil for an engine request.
    private mutating func consumerAction(_ request: ClientRequest) -> Action? {
        switch request {
        case .attach(let project, let scope, let credit, let grouped):
            guard self.attachedCredit == nil else {
                return .reply(.error(FanoutError(.failedPrecondition, "the connection has an attachment already")))
            }
            guard credit >= 1, Int(credit) <= self.maximumCredit else {
                return .reply(.error(FanoutError(.invalidArgument, "credit must be in 1...\(self.maximumCredit)", field: "credit")))
            }
            return .attach(project: project, scope: scope, credit: Int(credit), grouped: grouped)
        case .grant(let credit):
            guard let held = self.attachedCredit else {
                return .reply(.error(FanoutError(.failedPrecondition, "GRANT needs an attachment")))
            }
            // The engine refuses a GRANT of 0; the server's maximum may be lower than the engine's.
            guard held + Int(credit) <= self.maximumCredit else {
                return .reply(.error(FanoutError(.invalidArgument, "credit may not pass \(self.maximumCredit) in all (\(held) held)", field: "credit")))
            }
            return .grant(Int(credit))
        case .acknowledge(let ids):
            guard self.attachedCredit != nil else {
                return .reply(.error(FanoutError(.failedPrecondition, "ACK needs an attachment")))
            }
            return .acknowledge(ids)
        case .detach:
            guard self.attachedCredit != nil else {
                return .reply(.error(FanoutError(.failedPrecondition, "DETACH needs an attachment")))
            }
            self.attachedCredit = nil
            return .detach
        case .snapshot:
            return .snapshot
        default:
            return nil
        }
    }

    private mutating func authenticate(_ hello: Hello) -> Action {
        let credential: [UInt8]
        switch hello.credential {
        case .apiKey(let key):
            credential = key
        case .installationAuthToken(let token):
            let now = self.seconds
            return self.authenticateDevice(hello.role) { tokens throws(CredentialError) in .device(try tokens.verify(token, now: now)) }
        case .installationRefreshToken(let token):
            return self.authenticateDevice(hello.role) { _ throws(CredentialError) in .refresh(try RefreshToken(parsing: token)) }
        case .unknown(let kind, _):
            return .fail(.error(FanoutError(.unauthenticated, "credential kind \(kind) is unknown")))
        }
        guard let key = self.keys.authenticate(credential) else {
            return .fail(.error(FanoutError(.unauthenticated, "the API key is not valid")))
        }
        guard key.mayConnect(as: hello.role) else {
            return .fail(.error(FanoutError(.unauthenticated, "a \(key.role) key cannot connect as \(hello.role)")))
        }
        self.phase = .ready(.key(key, role: hello.role))
        var welcome = self.welcome
        welcome.projects = key.projects.names
        return .reply(.welcome(welcome))
    }

    /// An installation's credential: read and checked here (signature, expiry), then by the engine.
    private mutating func authenticateDevice(_ role: Hello.Role, _ read: (InstallationTokens) throws(CredentialError) -> Principal) -> Action {
        guard role == .device else {
            return .fail(.error(FanoutError(.unauthenticated, "an installation credential connects as device")))
        }
        guard let tokens = self.tokens else {
            return .fail(.error(FanoutError(.unauthenticated, "this server issues no installation credentials")))
        }
        do throws(CredentialError) {
            let principal = try read(tokens)
            self.phase = .verifying(principal)
            return .verify(principal)
        } catch {
            self.phase = .ended
            return .fail(.error(FanoutError(.unauthenticated, error.description)))
        }
    }
}
