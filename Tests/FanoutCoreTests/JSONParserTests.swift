import FanoutCore
import FanoutTestSupport
import Testing

@Suite("JSON parser")
struct JSONParserTests {
    func parse(_ text: String) throws(JSONParser.Error) -> JSONValue {
        try JSONParser.parse(Array(text.utf8))
    }

    @Test func parsesEveryKind() throws {
        let value = try self.parse(#" {"a": [1, -2.5e3, true, false, null, "x\n\u00e9\ud83d\ude00"], "b": {}} "#)
        guard case .object(let object) = value, case .array(let array)? = object["a"] else {
            Issue.record("expected an object with an array")
            return
        }
        #expect(array.count == 6)
        #expect(array[1] == .number(JSONNumber(text: "-2.5e3")))
        #expect(array[5] == .string("x\né😀"))
        #expect(object["b"] == .object(JSONObject()))
        #expect(object.members.map(\.key) == ["a", "b"], "members keep input order")
    }

    @Test(arguments: [
        ("", "unexpected end of input"),
        ("{", "expected a string key"),
        ("{\"a\":1,}", "expected a string key"),
        ("[1,]", "unexpected character"),
        ("{\"a\":1}x", "unexpected data after the JSON value"),
        ("01", "unexpected data after the JSON value"),
        ("1.", "digits after '.'"),
        ("-", "a number needs digits"),
        ("1e", "exponent"),
        ("\"a\u{01}\"", "raw control character"),
        ("\"\\x\"", "invalid escape"),
        ("\"\\ud800\"", "lone surrogate"),
        ("\"\\udc00\"", "lone surrogate"),
        ("\"\\u12\"", "four hex digits"),
        ("tru", "unexpected"),
        ("{\"a\":1,\"a\":2}", "duplicate key at a"),
        ("{\"m\":{\"data\":{\"k\":\"1\",\"k\":\"2\"}}}", "duplicate key at m.data.k"),
        (#"{"a":{"b":[1,{"x":2}]},"c":[{"d":1},{"k":1,"k":2}]}"#, "duplicate key at c.k"),
        (#"{"a":1,"\u0061":2}"#, "duplicate key at a"),
        ("{" + (0..<40).map { "\"k\($0)\":\($0)" }.joined(separator: ",") + ",\"k17\":0}", "duplicate key at k17"),
        ("[" + String(repeating: "9", count: 65) + "]", "longer than 64 characters"),
        ("'a'", "unexpected character"),
    ])
    func rejects(_ text: String, _ reason: String) {
        do {
            _ = try self.parse(text)
            Issue.record("accepted \(text.debugDescription)")
        } catch {
            #expect(error.reason.contains(reason), "\(text.debugDescription): \(error.reason)")
        }
    }

    /// From 16 members on, duplicates are found through key hashes: distinct keys must all survive.
    @Test func largeObjectsKeepEveryMember() throws {
        let text = "{" + (0..<40).map { "\"k\($0)\":\($0)" }.joined(separator: ",") + #","\u006b40":40}"#
        guard case .object(let object) = try self.parse(text) else {
            Issue.record("expected an object")
            return
        }
        #expect(object.members.map(\.key) == (0...40).map { "k\($0)" })
        #expect(object["k40"] == .number(JSONNumber(40)))
    }

    /// Duplicate keys are found through hashes of a key's length and first and last eight bytes:
    /// against a model that compares decoded keys, with keys that share those words, escaped
    /// spellings, objects past 16 members and keys within the input's first eight bytes.
    @Test(arguments: [7, 8, 9] as [UInt64])
    func duplicateKeysMatchAModel(seed: UInt64) throws {
        var random = SeededRandomNumberGenerator(seed: seed)
        let pool = (0...20).map { String(repeating: "a", count: $0) } + (0...20).map { String(repeating: "ab", count: $0 / 2) + "c" }
            + ["", "a", "b", "ab", "ba", "aab"].map { "headword" + $0 + "tailword" }
        for _ in 0..<400 {
            let keys = (0..<Int.random(in: 1...40, using: &random)).map { _ in pool.randomElement(using: &random)! }
            let members = keys.enumerated().map { index, key in
                // Some keys spelled with a \u escape: equal once decoded.
                let spelled = key.isEmpty || Bool.random(using: &random) ? key : #"\u00"# + String(key.utf8.first!, radix: 16) + key.dropFirst()
                return #""\#(spelled)":\#(index)"#
            }
            let text = String(repeating: " ", count: Int.random(in: 0...3, using: &random)) + "{" + members.joined(separator: ",") + "}"
            if Set(keys).count < keys.count {
                #expect(throws: JSONParser.Error.self) { try self.parse(text) }
            } else {
                guard case .object(let object) = try self.parse(text) else {
                    Issue.record("expected an object")
                    continue
                }
                #expect(object.members.map(\.key) == keys)
            }
        }
    }

    /// Objects past 16 members inside one another, each keeping its own keys: an inner object's
    /// keys never count against the outer's, and an outer key repeated after an inner object is
    /// still found.
    @Test(arguments: [11, 12] as [UInt64])
    func duplicateKeysInNestedObjectsMatchAModel(seed: UInt64) throws {
        var random = SeededRandomNumberGenerator(seed: seed)
        for _ in 0..<200 {
            var repeats = false
            func object(depth: Int) -> String {
                let count = Int.random(in: 10...30, using: &random)
                // Every level draws from the same names, so only a model per object tells repeats apart.
                var keys = (0..<count).map { "k\($0)" }
                if Int.random(in: 0..<8, using: &random) == 0 {
                    keys.append(keys.randomElement(using: &random)!)
                    repeats = true
                }
                keys.shuffle(using: &random)
                let members = keys.map { key in
                    let value = depth < 2 && Int.random(in: 0..<6, using: &random) == 0 ? object(depth: depth + 1) : "0"
                    return #""\#(key)":\#(value)"#
                }
                return "{" + members.joined(separator: ",") + "}"
            }
            let text = object(depth: 0)
            if repeats {
                #expect(throws: JSONParser.Error.self) { try self.parse(text) }
            } else {
                #expect(throws: Never.self) { try self.parse(text) }
            }
        }
    }

    /// Keys that share their length and first and last eight bytes (they differ in the middle)
    /// collide in the words' hash. After a few such false alarms past its 16th key, an object's
    /// keys are told apart by a seeded hash: a megabyte of them once took seconds, comparing each
    /// key with every earlier one (the time limit guards against that coming back; the parse takes
    /// about a second in a debug build). The repeat is of a key among the first 16, which the
    /// switch must carry over.
    @Test(.timeLimit(.minutes(1)))
    func keysChosenToCollideCostNoComparisons() throws {
        let limits = { var limits = JSONParser.Limits(); limits.maximumBytes = 4 << 20; return limits }()
        let keys = (0..<60_000).map { "headword" + String($0, radix: 36) + "tailword" }
        let text = "{" + keys.map { #""\#($0)":0"# }.joined(separator: ",") + "}"
        guard case .object(let object) = try JSONParser.parse(Array(text.utf8), limits: limits) else {
            Issue.record("expected an object")
            return
        }
        #expect(object.members.map(\.key) == keys)
        // The same key again, its first middle character spelled as an escape, is still found.
        let repeated = #","headword\u0035tailword":1}"#  // "5" is key number 5
        let duplicate = Array(text.dropLast().utf8) + Array(repeated.utf8)
        #expect(throws: JSONParser.Error.self) { try JSONParser.parse(duplicate, limits: limits) }
    }

    /// Strings are scanned eight bytes at a time until a byte needs a look: a quote, a backslash, a
    /// control character or non-ASCII must be seen wherever it falls.
    @Test func everySpecialByteIsSeenAtEveryPosition() throws {
        for length in 1...20 {
            for position in 0..<length {
                for special in ["\"", "\\", "\n", "é", "\u{01}", "😀"] {
                    let text = String(repeating: "a", count: position) + special + String(repeating: "b", count: length - position - 1)
                    #expect(try JSONParser.parse(JSONWriter.encode(.string(text))) == .string(text))
                }
                var raw = Array(("\"" + String(repeating: "a", count: length) + "\"").utf8)
                raw[1 + position] = 0x1F
                #expect(throws: JSONParser.Error.self) { try JSONParser.parse(raw) }
                raw[1 + position] = 0xFF
                #expect(throws: JSONParser.Error.self) { try JSONParser.parse(raw) }
            }
        }
    }

    @Test func boundsDepthAndSize() throws {
        let deep = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        #expect(throws: Never.self) { try self.parse(deep) }
        let tooDeep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
        #expect(throws: JSONParser.Error.self) { try self.parse(tooDeep) }
        let hostile = String(repeating: "[", count: 1_000_000)
        #expect(throws: JSONParser.Error.self) { try self.parse(hostile) }
        var limits = JSONParser.Limits()
        limits.maximumBytes = 10
        #expect(throws: JSONParser.Error.self) { try JSONParser.parse(Array("[1,2,3,4,5,6]".utf8), limits: limits) }
    }

    @Test func rejectsInvalidUTF8() {
        for bytes in [[0x22, 0xFF, 0x22], [0x22, 0xC3, 0x22], [0x22, 0xED, 0xA0, 0x80, 0x22]] as [[UInt8]] {
            #expect(throws: JSONParser.Error.self) { try JSONParser.parse(bytes) }
        }
    }

    @Test func writerRoundTrips() throws {
        let text = #"{"a":"q\"\\\n\t\u0001é","b":[1,2.5,-3e2,true,null],"c":{}}"#
        let value = try self.parse(text)
        let written = JSONWriter.encode(value)
        #expect(try JSONParser.parse(written) == value)
    }

    /// Random bytes and random mutations of valid JSON never crash the parser; whatever parses
    /// survives a write/parse round trip unchanged.
    @Test(arguments: [41, 42, 43] as [UInt64])
    func randomInputNeverCrashes(seed: UInt64) throws {
        var random = SeededRandomNumberGenerator(seed: seed)
        let seeds = [
            #"{"message":{"topic":"a","data":{"k":"v"},"android":{"ttl":"3s"}}}"#, #"[1,"\u00e9",{"x":[true,null]}]"#,
            #"{"validate_only":true,"message":{"token":"t","apns":{"payload":{"aps":{"badge":1}}}}}"#,
        ].map { Array($0.utf8) }
        let alphabet = Array(#"{}[]",:0123456789-+.eEtrufalsn\"\ u"#.utf8) + [0x00, 0xFF, 0xC3, 0xED]
        for _ in 0..<3000 {
            var bytes = seeds.randomElement(using: &random)!
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                let position = Int.random(in: 0...bytes.count, using: &random)
                switch Int.random(in: 0..<3, using: &random) {
                case 0 where position < bytes.count: bytes.remove(at: position)
                case 1: bytes.insert(alphabet.randomElement(using: &random)!, at: position)
                default: if position < bytes.count { bytes[position] = alphabet.randomElement(using: &random)! }
                }
            }
            if let value = try? JSONParser.parse(bytes) {
                #expect(try JSONParser.parse(JSONWriter.encode(value)) == value)
                // The validator's verdict does not depend on formatting.
                let direct = Result { () throws(MessageError) in try MessageParser.parseSendRequest(bytes) }
                let rewritten = Result { () throws(MessageError) in try MessageParser.parseSendRequest(JSONWriter.encode(value)) }
                switch (direct, rewritten) {
                case (.success, .success): break
                case (.failure(let a), .failure(let b)): #expect(a.violations == b.violations)
                default: Issue.record("verdicts differ for a re-written body")
                }
            }
        }
    }
}
