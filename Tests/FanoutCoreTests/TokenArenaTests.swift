@testable import FanoutCore
import FanoutModel
import FanoutTestSupport
import Testing

@Suite("Token arena")
struct TokenArenaTests {
    static let app = AppID("1:1234567890:android:0a1b2c3d")!
    static let now = Timestamp(millisecondsSinceEpoch: 1_767_225_600_000)

    /// A token of `length` bytes, different for each `number`.
    static func token(_ number: Int, length: Int) -> RegistrationToken {
        let stem = "t\(number)-"
        return RegistrationToken(stem + String(repeating: "x", count: max(0, length - stem.utf8.count)))!
    }

    /// Registrations, token rotations and deletions, with tokens of up to 4096 bytes so that
    /// chunks fill and empty quickly, against a dictionary: every installation's token reads back
    /// and finds its slot, rotated and deleted tokens find none, and the arena never holds more
    /// than four times the bytes still referenced (a little more: a chunk's end may be too short for
    /// the next token) plus two chunks (a chunk at most a quarter live is evacuated).
    @Test(arguments: [41, 42] as [UInt64])
    func registryTokensMatchTheModel(seed: UInt64) throws {
        var random = SeededRandomNumberGenerator(seed: seed)
        var registry = InstallationRegistry()
        var model: [UInt32: RegistrationToken] = [:]
        var gone: [RegistrationToken] = []
        var number = 0
        func nextToken() -> RegistrationToken {
            number += 1
            return Self.token(number, length: Int.random(in: 100...4096, using: &random))
        }
        func check() {
            for (slot, token) in model {
                #expect(registry.token(ofSlot: slot) == token)
                #expect(registry.slot(forToken: token) == slot)
                #expect(registry.slots(for: [.token(token)]) == [slot])
            }
            for token in gone.suffix(50) { #expect(registry.slot(forToken: token) == nil) }
            let live = model.values.reduce(0) { $0 + TokenArena.entryHeaderSize + $1.value.utf8.count }
            #expect(Double(registry.tokenArenaBytes) <= 4.1 * Double(live) + 2.0 * Double(TokenChunk.capacity))
        }
        for step in 0..<6000 {
            let roll = Int.random(in: 0..<100, using: &random)
            if roll < 45 || model.isEmpty {
                let token = nextToken()
                let result = try registry.register(RegistrationRequest(token: token, platform: .android, appID: Self.app), now: Self.now)
                model[result.installation.slot] = token
            } else if roll < 80 {
                let slot = model.keys.randomElement(using: &random)!
                let token = nextToken()
                try registry.replaceToken(atSlot: slot, with: token, now: Self.now)
                gone.append(model[slot]!)
                model[slot] = token
            } else {
                let slot = model.keys.randomElement(using: &random)!
                registry.delete(slot: slot)
                gone.append(model.removeValue(forKey: slot)!)
            }
            if step % 500 == 0 { check() }
        }
        check()
        // Deleting all but a few leaves at most the chunks those few are in, and the tail.
        for slot in model.keys.dropFirst(3) {
            registry.delete(slot: slot)
            model[slot] = nil
        }
        check()
        #expect(registry.tokenArenaBytes <= 4 * TokenChunk.capacity)
    }

    /// A copy (a snapshot's) keeps reading its tokens while both it and the original append.
    @Test
    func copiesAppendWithoutOverwritingEachOther() {
        var original = TokenArena()
        let shared = [UInt8]("shared-token".utf8)
        let sharedReference = shared.withUnsafeBytes { original.append($0, slot: 0) }
        var copy = original
        let mine = [UInt8](repeating: UInt8(ascii: "a"), count: 300)
        let theirs = [UInt8](repeating: UInt8(ascii: "b"), count: 200)
        let myReference = mine.withUnsafeBytes { original.append($0, slot: 1) }
        let theirReference = theirs.withUnsafeBytes { copy.append($0, slot: 2) }
        #expect(original.withBytes(myReference) { [UInt8]($0) } == mine)
        #expect(copy.withBytes(theirReference) { [UInt8]($0) } == theirs)
        #expect(original.withBytes(sharedReference) { [UInt8]($0) } == shared)
        #expect(copy.withBytes(sharedReference) { [UInt8]($0) } == shared)
        // Each copy lists the entries it wrote.
        #expect(original.entries(inChunk: myReference.chunk).map(\.slot) == [0, 1])
        #expect(copy.entries(inChunk: theirReference.chunk).map(\.slot) == (theirReference.chunk == sharedReference.chunk ? [0, 2] : [2]))
    }
}
