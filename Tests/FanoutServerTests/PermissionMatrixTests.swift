import FanoutCore
import FanoutKeys
@testable import FanoutServer
import FanoutTestSupport
import FanoutWire
import Testing

/// Every request opcode against every key role (docs/security.md's table), written out here on its
/// own: a new opcode fails `theTableCoversEveryRequestOpcode` until it gets a row.
@Suite("Permission matrix")
struct PermissionMatrixTests {
    /// Who may send each opcode: a admin, s sender, c consumer, d device (its own installation
    /// only, by its auth token), r device by its refresh token, p an app's key (REGISTER only with
    /// the credentials option, and only a new installation).
    static let table: [UInt8: String] = [
        0x02: "ascdrp",  // PING
        0x10: "a", 0x11: "a", 0x12: "as", 0x13: "a", 0x14: "ascdrp", 0x15: "a",  // projects, snapshot, signing keys
        0x20: "ap", 0x21: "ad", 0x22: "ad", 0x23: "asd", 0x24: "adr", 0x25: "as", 0x26: "a", 0x27: "as",
        0x28: "a", 0x29: "ad", 0x2A: "as", 0x2B: "a", 0x2C: "ar", 0x2D: "a",  // installations, credentials
        0x30: "a", 0x31: "ad", 0x32: "a", 0x33: "asd", 0x34: "a", 0x35: "as", 0x36: "a", 0x37: "a",  // users, legacy IDs
        0x40: "ad", 0x41: "ad", 0x42: "asd", 0x43: "as", 0x44: "as", 0x45: "as",  // topics
        0x50: "as", 0x51: "asd", 0x52: "a", 0x53: "as",  // sends
        0x60: "acd", 0x61: "acd", 0x62: "acd", 0x63: "acd", 0x64: "acd",  // consumers
    ]

    static let letters: [Permissions.Principal: Character] = [.admin: "a", .sender: "s", .consumer: "c", .device: "d", .refresh: "r", .app: "p"]

    /// One sample request of every opcode but HELLO.
    static func samples() -> [Opcode: ClientRequest] {
        var samples = WireSamples(seed: 5)
        var byOpcode: [Opcode: ClientRequest] = [:]
        for _ in 0..<20_000 where byOpcode.count < 44 {
            let request = samples.request()
            if request.opcode != .hello, byOpcode[request.opcode] == nil { byOpcode[request.opcode] = request }
        }
        return byOpcode
    }

    @Test func theTableCoversEveryRequestOpcode() {
        let samples = Self.samples()
        #expect(samples.count == 44, "every request opcode but HELLO was generated")
        #expect(Set(samples.keys.map(\.rawValue)) == Set(Self.table.keys))
        #expect(Set(Permissions.requestOpcodes.filter { $0 != .hello }.map(\.rawValue)) == Set(Self.table.keys))
    }

    @Test(arguments: Permissions.Principal.allCases)
    func eachPrincipalMaySendWhatTheTableSays(role: Permissions.Principal) throws {
        let letter = try #require(Self.letters[role])
        for opcode in Self.samples().keys {
            let allowed = try #require(Self.table[opcode.rawValue]).contains(letter)
            #expect(Permissions.allows(role, opcode) == allowed, "\(role) \(opcode)")
        }
        #expect(!Permissions.allows(role, .hello), "HELLO only opens a connection")
    }

    /// The key roles through the connection's state machine: a denied request is answered
    /// PERMISSION_DENIED and the connection stays; an allowed one goes on to the engine.
    @Test(arguments: [Hello.Role.admin, .sender, .consumer, .app])
    func aKeyConnectionIsRefusedExactlyWhatItsRoleMayNotSend(role: Hello.Role) throws {
        let secret = Array("matrix-key-0123456789".utf8)
        let letter = try #require(Self.letters[Permissions.Principal(role: role)])
        for (opcode, request) in Self.samples() {
            var state = ConnectionState(
                keys: APIKeyStore([APIKey(name: "k", role: role, projects: .all, secret: secret)]),
                welcome: ConnectionStateTests.welcome
            )
            _ = state.receive(.hello(Hello(role: role, credential: .apiKey(secret))))
            let action = state.receive(request)
            let denied = ConnectionStateTests.code(action) == .permissionDenied
            #expect(denied == !(try #require(Self.table[opcode.rawValue])).contains(letter), "\(role) \(opcode): \(action)")
            #expect(state.receive(.ping) == .reply(.pong), "the connection stays after \(opcode)")
        }
    }
}
