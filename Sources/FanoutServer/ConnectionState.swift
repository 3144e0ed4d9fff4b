internal import FanoutCore
internal import FanoutKeys
internal import FanoutWire

/// The protocol rules of one connection that do not touch the engine: the handshake, roles and
/// project permissions (docs/wire-protocol.md section 4). Pure: it returns what to do, and the
/// connection does it.
struct ConnectionState {
    enum Action: Equatable {
        /// Answer with this and keep serving.
        case reply(ServerMessage)
        /// Answer with this and close the connection.
        case fail(ServerMessage)
        /// Authorised: perform it with the engine.
        case perform(ClientRequest)
    }

    private enum Phase {
        case awaitingHello
        case ready(key: APIKey, role: Hello.Role)
    }

    private var phase = Phase.awaitingHello
    let keys: APIKeyStore
    let welcome: Welcome

    init(keys: APIKeyStore, welcome: Welcome) {
        self.keys = keys
        self.welcome = welcome
    }

    /// The key the connection authenticated with, once it has.
    var key: APIKey? {
        if case .ready(let key, _) = self.phase { return key }
        return nil
    }

    mutating func receive(_ request: ClientRequest) -> Action {
        switch self.phase {
        case .awaitingHello:
            guard case .hello(let hello) = request else {
                return .fail(.error(FanoutError(.unauthenticated, "the first frame must be HELLO")))
            }
            return self.authenticate(hello)
        case .ready(let key, let role):
            if case .hello = request {
                return .fail(.error(FanoutError(.invalidArgument, "HELLO was sent twice")))
            }
            if role == .consumer, !Self.consumerMaySend(request.opcode) {
                return .reply(.error(FanoutError(.permissionDenied, "a consumer connection may not send \(request.opcode)")))
            }
            if case .snapshot = request, key.projects != .all {
                return .reply(.error(FanoutError(.permissionDenied, "a snapshot covers every project: it needs a key for all of them")))
            }
            if let project = request.project, !key.projects.contains(project) {
                return .reply(.error(FanoutError(.permissionDenied, "the key does not cover this project", field: "project")))
            }
            return .perform(request)
        }
    }

    /// What a consumer connection may send: the handshake, PING and its delivery stream.
    static func consumerMaySend(_ opcode: Opcode) -> Bool {
        switch opcode {
        case .hello, .ping, .attach, .grant, .acknowledge, .detach: return true
        default: return false
        }
    }

    private mutating func authenticate(_ hello: Hello) -> Action {
        let credential: [UInt8]
        switch hello.credential {
        case .apiKey(let key):
            credential = key
        case .installationAuthToken:
            return .fail(.error(FanoutError(.unauthenticated, "installation auth tokens are not supported yet; use an API key")))
        case .unknown(let kind, _):
            return .fail(.error(FanoutError(.unauthenticated, "credential kind \(kind) is unknown")))
        }
        guard let key = self.keys.authenticate(credential) else {
            return .fail(.error(FanoutError(.unauthenticated, "the API key is not valid")))
        }
        guard key.role == .admin || hello.role == .consumer else {
            return .fail(.error(FanoutError(.unauthenticated, "a consumer key cannot connect as admin")))
        }
        self.phase = .ready(key: key, role: hello.role)
        var welcome = self.welcome
        welcome.projects = key.projects.names
        return .reply(.welcome(welcome))
    }
}
