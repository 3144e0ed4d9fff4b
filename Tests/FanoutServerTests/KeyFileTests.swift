import FanoutKeys
import FanoutTestSupport
import FanoutWire
import Foundation
import Testing

/// The API key file (docs/security.md): names, roles, projects and the keys' SHA-256, never a key.
@Suite("API key file")
struct KeyFileTests {
    @Test func aKeyFileKeepsHashesAndAuthenticatesByTheKey() throws {
        let (adminSecret, admin) = try APIKey.generate(name: "admin", role: .admin, projects: .all)
        let (senderSecret, sender) = try APIKey.generate(name: "billing.sender", role: .sender, projects: .only(["shop", "news"]))
        let store = APIKeyStore([admin, sender])
        let text = store.text
        #expect(!text.contains(adminSecret) && !text.contains(senderSecret), "never a key in the file")
        #expect(text.contains("billing.sender sender news,shop sha256:"))

        let read = try APIKeyStore(parsing: text)
        #expect(read == store)
        #expect(read.authenticate(Array(senderSecret.utf8)) == sender)
        #expect(read.authenticate(Array(adminSecret.utf8)) == admin)
        #expect(read.authenticate(Array((adminSecret + "x").utf8)) == nil)
        #expect(read.authenticate([]) == nil)
        #expect(read.authenticate(admin.digest) == nil, "the digest is not a key")
        #expect("\(sender)" == "<sender key billing.sender for news,shop>")
    }

    @Test func theFirstFormatIsReadAndWrittenBackHashed() throws {
        let text = """
            # key role projects
            fk_2b7e151628aed2a6abf7158809cf4f3c762e7160f38b4da5 admin *
            fk_6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c consumer shop,news
            """
        let store = try APIKeyStore(parsing: text)
        #expect(store.clearKeyLines == 2)
        #expect(store.keys.map(\.role) == [.admin, .consumer])
        #expect(store.authenticate(Array("fk_6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c".utf8))?.projects == .only(["shop", "news"]))
        let rewritten = store.text
        #expect(!rewritten.contains("fk_"))
        let again = try APIKeyStore(parsing: rewritten)
        #expect(again.clearKeyLines == 0)
        #expect(again.authenticate(Array("fk_2b7e151628aed2a6abf7158809cf4f3c762e7160f38b4da5".utf8))?.role == .admin)
    }

    @Test(arguments: [
        ("a admin * sha256:00", 1, "64 hex digits"),
        ("a root * sha256:" + String(repeating: "0", count: 64), 1, "`admin`, `sender`, `consumer` or `app`"),
        ("a device * sha256:" + String(repeating: "0", count: 64), 1, "not `device`"),
        ("a/b admin * sha256:" + String(repeating: "0", count: 64), 1, "a key name"),
        ("a admin , sha256:" + String(repeating: "0", count: 64), 1, "projects are"),
        ("\n\nshort admin *", 3, "at least 16"),
        ("a admin", 1, "found 2 fields"),
        ("a admin * sha256:" + String(repeating: "0", count: 64) + "\na sender * sha256:" + String(repeating: "1", count: 64), 2, "used twice"),
        ("a admin * sha256:" + String(repeating: "0", count: 64) + "\nb sender * sha256:" + String(repeating: "0", count: 64), 2, "listed twice"),
    ])
    func aBadLineIsRefusedWithItsNumber(text: String, line: Int, message: String) {
        #expect {
            _ = try APIKeyStore(parsing: text)
        } throws: { error in
            guard let error = error as? APIKeyFileError else { return false }
            return error.line == line && error.message.contains(message)
        }
    }

    @Test func keysAreAddedAndRemovedByName() throws {
        var store = APIKeyStore([])
        try store.add(try APIKey.generate(name: "one", role: .consumer, projects: .all).key)
        let taken = try APIKey.generate(name: "one", role: .admin, projects: .all).key
        var copy = store
        #expect(throws: APIKeyFileError.self) { try copy.add(taken) }
        let removed = store.remove(named: "one")
        let removedTwice = store.remove(named: "one")
        #expect(removed && !removedTwice)
        #expect(store.keys.isEmpty)
    }

    @Test func theFileIsWrittenWholeAndReadableByItsOwnerOnly() throws {
        try TemporaryDirectory.with { directory in
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let path = directory + "/api-keys"
            let store = APIKeyStore([try APIKey.generate(name: "a", role: .admin, projects: .all).key])
            try APIKeyFile.write(store, to: path)
            #expect(try APIKeyFile.read(path) == store)
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            #expect((attributes[.posixPermissions] as? Int) == 0o600)
            #expect(!FileManager.default.fileExists(atPath: path + ".tmp"))
        }
    }

    @Test func keyRolesConnectAsTheirOwnRoleAdminsAsAnyKeyRole() throws {
        let admin = try APIKey.generate(name: "a", role: .admin, projects: .all).key
        let sender = try APIKey.generate(name: "s", role: .sender, projects: .all).key
        let consumer = try APIKey.generate(name: "c", role: .consumer, projects: .all).key
        let app = try APIKey.generate(name: "p", role: .app, projects: .all).key
        let roles: [Hello.Role] = [.admin, .sender, .consumer, .app, .device]
        #expect(roles.map(admin.mayConnect(as:)) == [true, true, true, true, false])
        #expect(roles.map(sender.mayConnect(as:)) == [false, true, false, false, false])
        #expect(roles.map(consumer.mayConnect(as:)) == [false, false, true, false, false])
        #expect(roles.map(app.mayConnect(as:)) == [false, false, false, true, false])
    }
}
