import FanoutCore
import FanoutTestSupport
import Testing

@Suite("Model types")
struct ModelTypeTests {
    // MARK: - host:port

    @Test func hostAndPortFromACommandLine() {
        #expect(HostAndPort("127.0.0.1:7400") == HostAndPort(host: "127.0.0.1", port: 7400))
        #expect(HostAndPort("[::1]:0") == HostAndPort(host: "::1", port: 0), "brackets off, port 0 kept")
        #expect(HostAndPort("::1:65535") == HostAndPort(host: "::1", port: 65535), "the port is after the last colon")
        #expect(HostAndPort(":7400") == HostAndPort(host: "", port: 7400))
        for bad in ["7400", "localhost", "localhost:", "localhost:65536", "localhost:-1", "localhost:74x0"] {
            #expect(HostAndPort(bad) == nil, "\(bad)")
        }
    }

    // MARK: - FID

    @Test(arguments: [
        "cAAAAAAAAAAAAAAAAAAAAA", "f_____________________", "dGVmZ2hpamtsbW5vcHFyc3", "eWkQ0JhLD2hnwthI-tkvWz",
    ])
    func validFIDs(_ string: String) throws {
        let fid = try #require(FID(string))
        #expect(fid.string == string)
        #expect(fid.description == string)
    }

    @Test(arguments: [
        "",  // empty
        "cAAAAAAAAAAAAAAAAAAAA",  // 21 characters
        "cAAAAAAAAAAAAAAAAAAAAAA",  // 23 characters
        "aAAAAAAAAAAAAAAAAAAAAA",  // first character not c-f
        "gAAAAAAAAAAAAAAAAAAAAA",
        "cAAAAAAAAAAAAAAAAAAAA+",  // standard base64, not URL-safe
        "cAAAAAAAAAAAAAAAAAAAA/",
        "cAAAAAAAAAAAAAAAAAAAA=",
        "cAAAAAAAAAAAAAAAAAAAA ",
        "ccccccccccc",  // an 11-character legacy IID
        "cAAAAAAAAAAAAAAAAAAAAé",
    ])
    func invalidFIDs(_ string: String) {
        #expect(FID(string) == nil)
    }

    /// Every byte at every position of a valid FID, against the pattern `^[cdef][A-Za-z0-9_-]{21}$`
    /// read plainly: accepted exactly when the pattern matches, and then read back unchanged.
    @Test func everyByteAtEveryPositionAgainstThePattern() {
        let alphabet = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        let first = Set("cdef".utf8)
        let base = Array("eWkQ0JhLD2hnwthI-tkvWz".utf8)
        var mismatches = 0
        for position in 0..<22 {
            for byte in UInt8.min...UInt8.max {
                var bytes = base
                bytes[position] = byte
                let matches = position == 0 ? first.contains(byte) : alphabet.contains(byte)
                let fid = bytes.withUnsafeBytes { FID(utf8: $0) }
                if (fid != nil) != matches || (fid.map { Array($0.string.utf8) != bytes } ?? false) {
                    mismatches += 1
                }
            }
        }
        #expect(mismatches == 0)
    }

    /// A token is 1...4096 bytes of `0x21...0x7E`: every byte at every position of tokens whose
    /// lengths straddle the 16-byte steps of the check, from bytes and from a `String`.
    @Test func tokensByteByByteAgainstTheRule() {
        var mismatches = 0
        for length in [1, 15, 16, 17, 33, 163] {
            for position in 0..<length {
                for byte in UInt8.min...UInt8.max {
                    var bytes = Array(repeating: UInt8(ascii: "k"), count: length)
                    bytes[position] = byte
                    let valid = (0x21...0x7E).contains(byte)
                    let fromBytes = bytes.withUnsafeBytes { RegistrationToken(utf8: $0) }
                    if (fromBytes != nil) != valid || (fromBytes.map { Array($0.value.utf8) != bytes } ?? false) { mismatches += 1 }
                    if byte < 0x80, (RegistrationToken(String(decoding: bytes, as: UTF8.self)) != nil) != valid { mismatches += 1 }
                }
            }
        }
        #expect(mismatches == 0)
        let longest = Array(repeating: UInt8(ascii: "k"), count: RegistrationToken.maximumLength)
        #expect(longest.withUnsafeBytes { RegistrationToken(utf8: $0) } != nil)
        #expect((longest + [UInt8(ascii: "k")]).withUnsafeBytes { RegistrationToken(utf8: $0) } == nil)
        #expect([UInt8]().withUnsafeBytes { RegistrationToken(utf8: $0) } == nil)
    }

    /// ISO 8601 in UTC with milliseconds, as the CLI prints times; before 1970 too.
    @Test(arguments: [
        (0, "1970-01-01T00:00:00.000Z"),
        (1_767_225_600_000, "2026-01-01T00:00:00.000Z"),
        (1_772_323_199_999, "2026-02-28T23:59:59.999Z"),
        (951_782_400_123, "2000-02-29T00:00:00.123Z"),
        (-1, "1969-12-31T23:59:59.999Z"),
    ] as [(Int64, String)])
    func timestampsPrintAsISO8601(milliseconds: Int64, expected: String) {
        #expect(Timestamp(millisecondsSinceEpoch: milliseconds).iso8601 == expected)
    }

    @Test func fidDerivationMatchesTheFirebaseSDKs() {
        // Expected strings computed with Python's base64.urlsafe_b64encode after forcing the 0111 header.
        let vectors: [([UInt8], String)] = [
            ([UInt8](repeating: 0, count: 17), "cAAAAAAAAAAAAAAAAAAAAA"),
            ([UInt8](repeating: 255, count: 17), "f_____________________"),
            (Array(0..<17), "cAECAwQFBgcICQoLDA0ODx"),
            (Array(100..<117), "dGVmZ2hpamtsbW5vcHFyc3"),
        ]
        for (bytes, expected) in vectors {
            #expect(FID.make(fromRandomBytes: bytes).string == expected)
        }
    }

    @Test func generatedFIDsAreValidAndDistinct() throws {
        var seen = Set<FID>()
        var firstCharacters = Set<Character>()
        for _ in 0..<10_000 {
            let fid = try FID.generate()
            #expect(FID(fid.string) == fid)
            firstCharacters.insert(fid.string.first!)
            seen.insert(fid)
        }
        #expect(seen.count == 10_000)
        #expect(firstCharacters == ["c", "d", "e", "f"])
    }

    // MARK: - Topic names

    @Test(arguments: [
        ("news", "news"), ("/topics/news", "news"), ("A-Za-z0-9_.~%", "A-Za-z0-9_.~%"),
        (String(repeating: "a", count: 900), String(repeating: "a", count: 900)),
        ("/topics/" + String(repeating: "b", count: 900), String(repeating: "b", count: 900)),
    ])
    func validTopicNames(_ input: String, _ stored: String) throws {
        #expect(try #require(TopicName(input)).value == stored)
    }

    @Test(arguments: [
        "", "/topics/", "foo\n", "a b", "a/b", "/topics/private/x", "/topics//topics/a", "né", "a+b", "a*", "$x",
        "a&b", "a:b", "a=b", "a,b", String(repeating: "a", count: 901), "/topics/" + String(repeating: "a", count: 901),
    ])
    func invalidTopicNames(_ input: String) {
        #expect(TopicName(input) == nil)
    }

    @Test func topicNamesAreCaseSensitive() {
        #expect(TopicName("topiC") != TopicName("Topic"))
    }

    // MARK: - Tokens and ids

    @Test func registrationTokens() throws {
        #expect(RegistrationToken("") == nil)
        #expect(RegistrationToken("a b") == nil)
        #expect(RegistrationToken("tab\there") == nil)
        #expect(RegistrationToken("nön-ascii") == nil)
        #expect(RegistrationToken(String(repeating: "t", count: 4097)) == nil)
        #expect(RegistrationToken(String(repeating: "t", count: 4096)) != nil)
        let token = try #require(RegistrationToken("dTxbVurMB3E:APA91bSecretPart"))
        #expect(!token.description.contains("APA91b"), "a token's description must be redacted")
        #expect(!RegistrationAddress.token(token).description.contains("APA91b"))
    }

    /// A request's registrations, packed: each reads back as the string it was, and the batch
    /// made from them classifies each as `RegistrationAddress(parsing:)` does (the reference), a
    /// token keeping its bytes.
    @Test func registrationListsKeepEachStringAndParseAsAddressesDo() throws {
        var samples = WireSamples(seed: 11)
        var strings = ["", "cAAAAAAAAAAAAAAAAAAAAA", "bk3RNwTe3H0:CI2k", "has space", "dGVmZ2hpamtsbW5vcHFy", "é", String(repeating: "t", count: 4097)]
        strings += (0..<300).map { _ in samples.bool() ? samples.string(maximum: 30) : samples.fid().string }
        let list = RegistrationList(strings)
        #expect(Array(list) == strings)
        #expect(list.indices.map { index in list.withBytes(at: index) { Array($0) } } == strings.map { Array($0.utf8) })
        var appended = RegistrationList()
        for string in strings { appended.append(bytes: Array(string.utf8)) }
        #expect(appended == list)

        let batch = try RegistrationBatch(parsing: list, maximum: 1000)
        #expect(batch.count == strings.count)
        #expect(strings.indices.map { batch.address(at: $0) } == strings.map { RegistrationAddress(parsing: $0) })
        #expect(throws: FanoutError.self) { try RegistrationBatch(parsing: list, maximum: strings.count - 1) }
    }

    @Test func registrationAddressesPreferFIDs() throws {
        #expect(RegistrationAddress(parsing: "cAAAAAAAAAAAAAAAAAAAAA") == .fid(try #require(FID("cAAAAAAAAAAAAAAAAAAAAA"))))
        #expect(RegistrationAddress(parsing: "bk3RNwTe3H0:CI2k") == .token(try #require(RegistrationToken("bk3RNwTe3H0:CI2k"))))
        #expect(RegistrationAddress(parsing: "") == nil)
        #expect(RegistrationAddress(parsing: "has space") == nil)
    }

    @Test(arguments: [
        ("default", true), ("my-app-1234", true), ("abcdef", true), ("1065473598624", true), ("1", true),
        ("abcde", false), ("Upper-case", false), ("1abcdef", false), ("ends-with-", false), ("", false),
        (String(repeating: "a", count: 31), false), (String(repeating: "1", count: 21), false), ("with_underscore", false),
    ])
    func projectIDs(_ value: String, _ valid: Bool) {
        #expect((ProjectID(value) != nil) == valid)
    }

    @Test func userAppAndAPNsIDs() throws {
        #expect(UserID("uid-123") != nil)
        #expect(UserID("") == nil)
        #expect(UserID("has space") == nil)
        #expect(UserID(String(repeating: "u", count: 128)) != nil)
        #expect(UserID(String(repeating: "u", count: 129)) == nil)
        #expect(AppID("1:1065473598624:android:d7820756c5c808db03d5c5") != nil)
        #expect(AppID("") == nil)
        let apns = try #require(APNsDeviceToken(String(repeating: "AB", count: 32)))
        #expect(apns.hex == String(repeating: "ab", count: 32))
        #expect(!apns.description.contains("ab"))
        #expect(APNsDeviceToken("abc") == nil)  // odd length
        #expect(APNsDeviceToken(String(repeating: "zz", count: 32)) == nil)
        #expect(APNsDeviceToken(String(repeating: "ab", count: 101)) == nil)
    }

    @Test func deviceDetailsNameTheBadField() throws {
        let details = try DeviceDetails(name: "Ana's iPhone 🍎", os: "iOS 19", type: "phone")
        #expect(details.name == "Ana's iPhone 🍎")
        #expect(throws: FanoutError(.invalidArgument, "", field: "deviceOs")) {
            try DeviceDetails(name: "ok", os: "bad\u{7}", type: nil)
        }
        #expect(throws: FanoutError(.invalidArgument, "", field: "deviceType")) {
            try DeviceDetails(type: String(repeating: "x", count: 257))
        }
    }

    @Test func timestampsSaturate() {
        let start = Timestamp(millisecondsSinceEpoch: 1000)
        #expect(start.advanced(by: .seconds(2)).millisecondsSinceEpoch == 3000)
        #expect(start.advanced(by: .milliseconds(-1500)).millisecondsSinceEpoch == -500)
        #expect(Timestamp(millisecondsSinceEpoch: .max - 1).advanced(by: .seconds(10)).millisecondsSinceEpoch == .max)
    }

    /// `--durability` as fanoutd and fanout-load spell it, one parser for both.
    @Test func durabilityParsesTheCommandLineSpellings() {
        #expect(Durability(parsing: "always") == .always)
        #expect(Durability(parsing: "none") == Durability.none)
        #expect(Durability(parsing: "interval:250") == .interval(milliseconds: 250))
        for bad in ["", "Always", "interval:", "interval:0", "interval:-5", "interval:x", "sometimes"] {
            #expect(Durability(parsing: bad) == nil, "\(bad)")
        }
    }
}
