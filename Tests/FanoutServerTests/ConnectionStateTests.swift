import FanoutCore
import FanoutKeys
@testable import FanoutServer
import FanoutWire
import Testing

/// The connection's protocol rules as a pure state machine, without sockets or an engine: the
/// handshake, roles, project permissions, the attachment and its credit.
@Suite("Connection state machine")
struct ConnectionStateTests {
    static let adminSecret = Array("admin-key-0123456789".utf8)
    static let consumerSecret = Array("consumer-key-0123456789".utf8)
    static let newsSecret = Array("news-only-key-0123456789".utf8)
    static let adminKey = APIKey(name: "admin", role: .admin, projects: .all, secret: adminSecret)
    static let consumerKey = APIKey(name: "consumer", role: .consumer, projects: .all, secret: consumerSecret)
    static let newsKey = APIKey(name: "news", role: .admin, projects: .only(["news"]), secret: newsSecret)
    static let welcome = Welcome(maximumPayloadSize: 1 << 20, idleTimeoutMilliseconds: 60_000, maximumCredit: 100, maximumInFlight: 64, projects: [])

    static func state() -> ConnectionState {
        ConnectionState(keys: APIKeyStore([Self.adminKey, Self.consumerKey, Self.newsKey]), welcome: Self.welcome)
    }

    static func connected(_ secret: [UInt8], as role: Hello.Role) -> ConnectionState {
        var state = Self.state()
        _ = state.receive(.hello(Hello(role: role, credential: .apiKey(secret))))
        return state
    }

    static func code(_ action: ConnectionState.Action) -> FanoutError.Code? {
        switch action {
        case .reply(.error(let error)), .fail(.error(let error)): return error.code
        default: return nil
        }
    }

    @Test func theHandshakeComesFirstAndOnce() {
        var state = Self.state()
        #expect(Self.code(state.receive(.ping)) == .unauthenticated)
        guard case .fail = state.receive(.ping) else {
            Issue.record("a request before HELLO closes the connection")
            return
        }
        var bad = Self.state()
        #expect(Self.code(bad.receive(.hello(Hello(role: .admin, credential: .apiKey(Array("wrong-key-0123456789".utf8)))))) == .unauthenticated)
        var consumerAsAdmin = Self.state()
        #expect(Self.code(consumerAsAdmin.receive(.hello(Hello(role: .admin, credential: .apiKey(Self.consumerSecret))))) == .unauthenticated)

        var good = Self.state()
        guard case .reply(.welcome(let welcome)) = good.receive(.hello(Hello(role: .admin, credential: .apiKey(Self.adminSecret)))) else {
            Issue.record("a valid HELLO is welcomed")
            return
        }
        #expect(welcome.projects == ["*"])
        #expect(good.receive(.ping) == .reply(.pong), "PING is answered without the engine")
        guard case .fail = good.receive(.hello(Hello(role: .admin, credential: .apiKey(Self.adminSecret)))) else {
            Issue.record("a second HELLO closes the connection")
            return
        }
    }

    @Test func rolesAndProjectsLimitWhatIsPerformed() {
        var consumer = Self.connected(Self.consumerSecret, as: .consumer)
        #expect(Self.code(consumer.receive(.subscribe(project: "default", topic: "news", registrations: ["t"]))) == .permissionDenied)
        #expect(consumer.receive(.ping) == .reply(.pong), "the connection survives a refusal")

        var news = Self.connected(Self.newsSecret, as: .admin)
        #expect(Self.code(news.receive(.createProject(project: "other"))) == .permissionDenied)
        #expect(news.receive(.createProject(project: "news")) == .perform(.createProject(project: "news")))
        #expect(Self.code(news.receive(.snapshot)) == .permissionDenied, "a snapshot covers every project")
        var admin = Self.connected(Self.adminSecret, as: .admin)
        #expect(admin.receive(.snapshot) == .snapshot)
    }

    @Test func anAttachmentHoldsCreditWithinTheMaximum() {
        var state = Self.connected(Self.consumerSecret, as: .consumer)
        #expect(Self.code(state.receive(.grant(credit: 1))) == .failedPrecondition)
        #expect(Self.code(state.receive(.acknowledge([]))) == .failedPrecondition)
        #expect(Self.code(state.receive(.detach)) == .failedPrecondition)
        #expect(Self.code(state.receive(.attach(project: "default", scope: .platform(.ios), credit: 0))) == .invalidArgument)
        #expect(Self.code(state.receive(.attach(project: "default", scope: .platform(.ios), credit: 101))) == .invalidArgument)

        #expect(state.receive(.attach(project: "default", scope: .platform(.ios), credit: 60)) == .attach(project: "default", scope: .platform(.ios), credit: 60))
        state.attached(credit: 60)
        #expect(Self.code(state.receive(.attach(project: "default", scope: .platform(.ios), credit: 1))) == .failedPrecondition, "one attachment per connection")
        #expect(state.receive(.grant(credit: 40)) == .grant(40))
        state.granted(40)
        #expect(Self.code(state.receive(.grant(credit: 1))) == .invalidArgument, "100 held: the maximum")
        #expect(state.attachedCredit == 100)
        let id = DeliveryID(messageSequence: 1, slot: 2)
        #expect(state.receive(.acknowledge([id])) == .acknowledge([id]))
        #expect(state.receive(.detach) == .detach)
        #expect(Self.code(state.receive(.grant(credit: 1))) == .failedPrecondition, "detached")
        #expect(state.receive(.attach(project: "default", scope: .platform(.web), credit: 1)) == .attach(project: "default", scope: .platform(.web), credit: 1))
    }

    /// A refused ATTACH (the engine said no) leaves the connection without an attachment.
    @Test func aRefusedAttachLeavesNoAttachment() {
        var state = Self.connected(Self.consumerSecret, as: .consumer)
        #expect(state.receive(.attach(project: "default", scope: .installations(["nobody"]), credit: 5)) == .attach(project: "default", scope: .installations(["nobody"]), credit: 5))
        // The connection does not call `attached` when the engine refuses.
        #expect(state.attachedCredit == nil)
        #expect(Self.code(state.receive(.detach)) == .failedPrecondition)
    }

    /// The end of the input ends the connection: an attachment is detached, a graceful shutdown
    /// says GOAWAY (after the replies), and nothing is received after.
    @Test func theInputEndingEndsTheConnection() {
        var attached = Self.connected(Self.consumerSecret, as: .consumer)
        guard case .attach(_, _, let credit, _) = attached.receive(.attach(project: "default", scope: .platform(.android), credit: 10)) else {
            Issue.record("attach")
            return
        }
        attached.attached(credit: credit)
        #expect(attached.inputEnded(goAway: .goAway(.unavailable, "shutting down")) == .init(detach: true, goAway: .goAway(.unavailable, "shutting down")))
        #expect(attached.attachedCredit == nil)
        guard case .fail = attached.receive(.ping) else {
            Issue.record("nothing is received after the input ended")
            return
        }

        var admin = Self.connected(Self.adminSecret, as: .admin)
        #expect(admin.inputEnded(goAway: nil) == .init(detach: false, goAway: nil), "the peer closed: nothing to say")
    }
}

