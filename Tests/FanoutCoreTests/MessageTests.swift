import FanoutCore
import FanoutTestSupport
import Foundation
import Testing

@Suite("Messages")
struct MessageTests {
    static let token = "dTxbVurMB3E:APA91bHlyoWjJKxBzYF4Z1Fz8mH6ZfmjqXjBc3aE7WzD2dVqkQ"

    func parse(_ text: String) throws(MessageError) -> SendRequest {
        try MessageParser.parseSendRequest(Array(text.utf8))
    }

    /// The field paths of the violations, or [] when the body is valid.
    func violations(_ text: String) -> [String] {
        do {
            _ = try self.parse(text)
            return []
        } catch {
            return error.violations.map(\.field)
        }
    }

    // MARK: - firebase-admin corpus

    static var corpus: [(name: String, bytes: [UInt8])] {
        let directory = Bundle.module.url(forResource: "firebase-admin", withExtension: nil)!
        let files = try! FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "json" }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
        return files.map { ($0.lastPathComponent, Array(try! Data(contentsOf: $0))) }
    }

    @Test func everyFirebaseAdminBodyIsAccepted() throws {
        let corpus = Self.corpus
        #expect(corpus.count == 12)
        for (name, bytes) in corpus {
            do {
                let request = try MessageParser.parseSendRequest(bytes)
                let rendered = RenderedMessage(request.message, acceptedAt: Timestamp(millisecondsSinceEpoch: 0))
                for platform in Platform.allCases {
                    #expect(rendered.fits(platform), "\(name) \(platform)")
                    #expect(throws: Never.self) { try JSONParser.parse(rendered.payload(for: platform)) }
                }
            } catch {
                Issue.record("\(name) refused: \(error.violations)")
            }
        }
    }

    /// Rendering copies what it can of a compact body in whole runs of members; a body with
    /// whitespace anywhere (inside some objects and not others) is copied member by member. Both
    /// give the same bytes, for the corpus (pretty-printed as generated) and for bodies that
    /// override, replace, rename (snake_case) and skip members on every platform.
    @Test(arguments: [51, 52] as [UInt64])
    func renderingDoesNotDependOnFormatting(seed: UInt64) throws {
        var random = SeededRandomNumberGenerator(seed: seed)
        let token = Self.token
        let bodies = Self.corpus.map(\.bytes) + [
            #"{"token":"\#(token)","data":{"a":"1","b":"2","t\u0061g":"3"},"notification":{"title":"T","body":"B","image":"https://i/x.png"},"android":{"data":{"b":"android","z":"26"},"notification":{"channelId":"c","title":"AT","clickAction":"OPEN","lightSettings":{"color":{"red":1},"lightOnDuration":"1s","lightOffDuration":"2s"},"notificationCount":"5","tag":"t","vibrateTimings":["1s","0.5s"]}},"webpush":{"data":{"c":"web","a":"w"},"notification":{"icon":"i","body":"WB","actions":[{"action":"a","title":"A"}],"requireInteraction":true}}}"#,
            #"{"token":"\#(token)","data":{"k":"v","aps":"x","fcm_options":"y","c1":"z","last":"l"},"notification":{"body":"B","image":"https://i/x.png"},"apns":{"headers":{"apns-priority":"10"},"payload":{"aps":{"alert":{"title":"T","loc-key":"K","loc-args":["a","b"]},"badge":0,"sound":{"critical":1,"name":"s","volume":0.5}},"c1":{"n":[1,2,{"m":null}]},"k":false}},"android":{"notification":{"notification_count":3,"body":"AB","light_settings":{"color":{"red":1},"lightOnDuration":"1s","lightOffDuration":"2s"},"tag":"t"}}}"#,
            #"{"token":"\#(token)","data":{"x":"1"},"apns":{"payload":{"custom":"c","aps":{"content-available":1}}},"android":{"data":{"x":"2"},"notification":{"sticky":true,"eventTime":"2024-01-01T00:00:00Z"}},"webpush":{"data":{}}}"#,
        ].map { Array($0.utf8) }
        let whitespace = [" ", "\n", "\t", "\r\n  "].map { Array($0.utf8) }
        for body in bodies {
            // The body without its whitespace (strings as they are: escapes stay as sent).
            let compact = Self.respaced(body) { _ in [] }
            #expect(try JSONParser.parse(compact) == JSONParser.parse(body))
            let expected = try Self.payloads(compact)
            #expect(try Self.payloads(body) == expected, "\(String(decoding: body, as: UTF8.self))")
            for _ in 0..<4 {
                let spaced = Self.respaced(compact) { byte in
                    Array("{[,:".utf8).contains(byte) && Int.random(in: 0..<4, using: &random) == 0 ? whitespace.randomElement(using: &random)! : []
                }
                #expect(try Self.payloads(spaced) == expected, "\(String(decoding: spaced, as: UTF8.self))")
            }
        }
    }

    /// `json` with its whitespace outside strings dropped, and `after(byte)` put after each other
    /// byte outside strings.
    static func respaced(_ json: [UInt8], after: (UInt8) -> [UInt8]) -> [UInt8] {
        var result: [UInt8] = []
        var inString = false
        var escaped = false
        for byte in json {
            if inString {
                result.append(byte)
                (inString, escaped) = (escaped || byte != UInt8(ascii: "\""), !escaped && byte == UInt8(ascii: "\\"))
            } else if byte == UInt8(ascii: "\"") {
                result.append(byte)
                inString = true
            } else if ![UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t")].contains(byte) {
                result.append(byte)
                result += after(byte)
            }
        }
        return result
    }

    static func payloads(_ body: [UInt8]) throws -> [String] {
        let rendered = RenderedMessage(try MessageParser.parseSendRequest(body).message, acceptedAt: Timestamp(millisecondsSinceEpoch: 0))
        return Platform.allCases.map { String(decoding: rendered.payload(for: $0), as: UTF8.self) }
    }

    /// The invalid side, built from the corpus: drop the target, retype fields, oversize data.
    @Test func mutatedFirebaseAdminBodiesAreRefusedNamingTheField() throws {
        for (name, bytes) in Self.corpus {
            guard case .object(let body) = try JSONParser.parse(bytes),
                case .object(var message)? = body["message"]
            else {
                Issue.record("\(name) is not an envelope")
                continue
            }
            func verdict(_ message: JSONObject) -> [String] {
                var mutated = body
                mutated.members = mutated.members.map { $0.key == "message" ? .init(key: "message", value: .object(message)) : $0 }
                do {
                    _ = try MessageParser.parseSendRequest(JSONWriter.encode(.object(mutated)))
                    return []
                } catch {
                    return error.violations.map(\.field)
                }
            }
            // No target.
            var untargeted = message
            untargeted.members.removeAll { ["token", "fid", "topic", "condition"].contains($0.key) }
            #expect(verdict(untargeted) == ["message"], "\(name) without a target")
            // Every string field at the top level or one level down, retyped to a number.
            for (index, member) in message.members.enumerated() {
                if case .string = member.value {
                    var retyped = message
                    retyped.members[index].value = .number(JSONNumber(1))
                    #expect(verdict(retyped).contains("message.\(member.key)"), "\(name) retyped \(member.key)")
                }
                if case .object(var inner) = member.value {
                    for (innerIndex, innerMember) in inner.members.enumerated() {
                        guard case .string = innerMember.value else { continue }
                        var retyped = message
                        inner.members[innerIndex].value = .bool(true)
                        retyped.members[index].value = .object(inner)
                        let fields = verdict(retyped)
                        #expect(
                            fields.contains { $0.hasPrefix("message.\(member.key).\(innerMember.key)") },
                            "\(name) retyped \(member.key).\(innerMember.key): \(fields)"
                        )
                        inner.members[innerIndex].value = innerMember.value
                    }
                }
            }
            // Oversized data.
            message.members.removeAll { $0.key == "data" }
            message.members.append(.init(key: "data", value: .object(JSONObject([.init(key: "big", value: .string(String(repeating: "x", count: 4100)))]))))
            #expect(verdict(message).contains("message"), "\(name) with 4 KB of data")
        }
    }

    // MARK: - Rules

    @Test(arguments: [
        // Targets
        (#"{"message":{}}"#, ["message"]),
        (#"{"message":{"topic":"a","token":"t"}}"#, ["message"]),
        (#"{"message":{"topic":"/topics/private/x"}}"#, ["message.topic"]),
        (#"{"message":{"topic":""}}"#, ["message.topic"]),
        (#"{"message":{"token":""}}"#, ["message.token"]),
        // 11 characters starting with c-f are a legacy Instance ID: the project decides (LegacyInstanceIDTests).
        (#"{"message":{"fid":"aaaaaaaaaaa"}}"#, ["message.fid"]),
        (#"{"message":{"fid":"cccccccccccc"}}"#, ["message.fid"]),
        (#"{"message":{"condition":"'a' in topics &&"}}"#, ["message.condition"]),
        (#"{"message":{"condition":"TopicA in topics"}}"#, ["message.condition"]),
        (#"{"message":{"user":"has space"}}"#, ["message.user"]),
        (#"{"message":{"tokens":[]}}"#, ["message.tokens"]),
        (#"{"message":{"tokens":["a",""],"fids":["bad"]}}"#, ["message.tokens[1]", "message.fids[0]"]),
        // Envelope and field names
        (#"{"validate_only":"yes","message":{"topic":"a"}}"#, ["body.validate_only"]),
        (#"{"validateOnly":true,"message":{"topic":"a"}}"#, []),
        (#"{"validate_only":true}"#, ["message"]),
        (#"{"message":{"topic":"a","colour":1}}"#, ["message"]),
        (#"{"message":{"topic":"a","android":{"collapse_key":"a","collapseKey":"b"}}}"#, ["message.android.collapse_key"]),
        (#"{"message":{"topic":"a","fcmOptions":{"analyticsLabel":"ok_label"}}}"#, []),
        (#"{"message":{"topic":"a","fcm_options":{"analytics_label":"bad label"}}}"#, ["message.fcm_options.analytics_label"]),
        (#"{"message":"not an object"}"#, ["message"]),
        (#"[1]"#, ["body"]),
        // Data
        (#"{"message":{"topic":"a","data":{"k":1}}}"#, ["message.data.k"]),
        (#"{"message":{"topic":"a","data":{"from":"x"}}}"#, ["message.data.from"]),
        (#"{"message":{"topic":"a","data":{"Message_Type":"x"}}}"#, ["message.data.Message_Type"]),
        (#"{"message":{"topic":"a","data":{"google.x":"x","GCM_y":"y","collapse_key":"ok"}}}"#, ["message.data.google.x", "message.data.GCM_y"]),
        (#"{"message":{"topic":"a","data":[]}}"#, ["message.data"]),
        // Notification
        (#"{"message":{"topic":"a","notification":{"title":1,"sound":"x"}}}"#, ["message.notification.title", "message.notification"]),
        // Android
        (#"{"message":{"topic":"a","android":{"priority":"urgent"}}}"#, ["message.android.priority"]),
        (#"{"message":{"topic":"a","android":{"priority":"HIGH","ttl":"2419200s"}}}"#, []),
        (#"{"message":{"topic":"a","android":{"ttl":"2419201s"}}}"#, ["message.android.ttl"]),
        (#"{"message":{"topic":"a","android":{"ttl":"-1s"}}}"#, ["message.android.ttl"]),
        (#"{"message":{"topic":"a","android":{"ttl":"10"}}}"#, ["message.android.ttl"]),
        (#"{"message":{"topic":"a","android":{"ttl":"1.0000000001s"}}}"#, ["message.android.ttl"]),
        (#"{"message":{"topic":"a","android":{"ttl":3600}}}"#, ["message.android.ttl"]),
        (#"{"message":{"topic":"a","android":{"data":{"gcm.x":"1"}}}}"#, ["message.android.data.gcm.x"]),
        (#"{"message":{"topic":"a","android":{"notification":{"color":"red"}}}}"#, ["message.android.notification.color"]),
        (#"{"message":{"topic":"a","android":{"notification":{"body_loc_args":["x"]}}}}"#, ["message.android.notification.body_loc_args"]),
        (#"{"message":{"topic":"a","android":{"notification":{"title_loc_args":["x"],"title_loc_key":"k"}}}}"#, []),
        (#"{"message":{"topic":"a","android":{"notification":{"visibility":"public"}}}}"#, ["message.android.notification.visibility"]),
        (#"{"message":{"topic":"a","android":{"notification":{"notification_priority":"PRIORITY_LOUD"}}}}"#, ["message.android.notification.notification_priority"]),
        (#"{"message":{"topic":"a","android":{"notification":{"proxy":"MAYBE"}}}}"#, ["message.android.notification.proxy"]),
        (#"{"message":{"topic":"a","android":{"notification":{"event_time":"2026-13-01T00:00:00Z"}}}}"#, ["message.android.notification.event_time"]),
        (#"{"message":{"topic":"a","android":{"notification":{"eventTime":"2026-01-01T00:00:00.5+02:00"}}}}"#, []),
        (#"{"message":{"topic":"a","android":{"notification":{"vibrate_timings":["1s","x"]}}}}"#, ["message.android.notification.vibrate_timings[1]"]),
        (#"{"message":{"topic":"a","android":{"notification":{"notification_count":-1}}}}"#, ["message.android.notification.notification_count"]),
        (#"{"message":{"topic":"a","android":{"notification":{"light_settings":{"color":{"red":2}}}}}}"#, [
            "message.android.notification.light_settings.color.red", "message.android.notification.light_settings.light_on_duration",
            "message.android.notification.light_settings.light_off_duration",
        ]),
        (#"{"message":{"topic":"a","android":{"direct_boot_ok":"yes"}}}"#, ["message.android.direct_boot_ok"]),
        // APNs
        (#"{"message":{"topic":"a","apns":{"headers":{"apns-priority":10}}}}"#, ["message.apns.headers.apns-priority"]),
        (#"{"message":{"topic":"a","apns":{"headers":{"apns-priority":"7"}}}}"#, ["message.apns.headers.apns-priority"]),
        (#"{"message":{"topic":"a","notification":{"title":"t"},"apns":{"headers":{"apns-priority":"10"}}}}"#, []),
        (#"{"message":{"topic":"a","data":{"k":"v"},"apns":{"headers":{"apns-priority":"10"}}}}"#, ["message.apns.headers.apns-priority"]),
        (#"{"message":{"topic":"a","apns":{"headers":{"apns-priority":"1","apns-push-type":"backgroundish"}}}}"#, ["message.apns.headers.apns-push-type"]),
        (#"{"message":{"topic":"a","apns":{"headers":{"apns-expiration":"soon"}}}}"#, ["message.apns.headers.apns-expiration"]),
        (#"{"message":{"topic":"a","apns":{"headers":{"apns-collapse-id":"0123456789012345678901234567890123456789012345678901234567890123"}}}}"#, []),
        (#"{"message":{"topic":"a","apns":{"headers":{"apns-collapse-id":"01234567890123456789012345678901234567890123456789012345678901234"}}}}"#, ["message.apns.headers.apns-collapse-id"]),
        (#"{"message":{"topic":"a","apns":{"headers":{"apns-id":"not-a-uuid"}}}}"#, ["message.apns.headers.apns-id"]),
        (#"{"message":{"topic":"a","apns":{"payload":{"aps":"x"}}}}"#, ["message.apns.payload.aps"]),
        (#"{"message":{"topic":"a","apns":{"payload":{"aps":{"alert":7}}}}}"#, ["message.apns.payload.aps.alert"]),
        (#"{"message":{"topic":"a","apns":{"payload":{"aps":{"alert":{"loc-args":["x"]}}}}}}"#, ["message.apns.payload.aps.alert.loc-args"]),
        (#"{"message":{"topic":"a","apns":{"payload":{"aps":{"alert":{"titel":"x"}}}}}}"#, ["message.apns.payload.aps.alert"]),
        (#"{"message":{"topic":"a","apns":{"payload":{"aps":{"badge":-1}}}}}"#, ["message.apns.payload.aps.badge"]),
        (#"{"message":{"topic":"a","apns":{"payload":{"aps":{"badge":"1"}}}}}"#, ["message.apns.payload.aps.badge"]),
        (#"{"message":{"topic":"a","apns":{"payload":{"aps":{"badge":9223372036854775807}}}}}"#, []),
        (#"{"message":{"topic":"a","apns":{"payload":{"aps":{"badge":-0}}}}}"#, []),
        (#"{"message":{"topic":"a","apns":{"payload":{"aps":{"badge":9223372036854775808}}}}}"#, ["message.apns.payload.aps.badge"]),
        (#"{"message":{"topic":"a","apns":{"payload":{"aps":{"badge":1.0}}}}}"#, ["message.apns.payload.aps.badge"]),
        (#"{"message":{"topic":"a","apns":{"payload":{"aps":{"badge":1e2}}}}}"#, ["message.apns.payload.aps.badge"]),
        (#"{"message":{"topic":"a","apns":{"payload":{"aps":{"badge":12345678901234567890123}}}}}"#, ["message.apns.payload.aps.badge"]),
        (#"{"message":{"topic":"a","apns":{"payload":{"aps":{"dismissal-date":-9223372036854775808}}}}}"#, ["message.apns.payload.aps.dismissal-date"]),
        (#"{"message":{"topic":"a","apns":{"payload":{"aps":{"alert":{"summary-arg-count":-9223372036854775808}}}}}}"#, []),
        (#"{"message":{"topic":"a","apns":{"payload":{"aps":{"alert":{"summary-arg-count":-9223372036854775809}}}}}}"#, ["message.apns.payload.aps.alert.summary-arg-count"]),
        (#"{"message":{"topic":"a","apns":{"payload":{"aps":{"alert":{"summary-arg-count":9223372036854775808}}}}}}"#, ["message.apns.payload.aps.alert.summary-arg-count"]),
        (#"{"message":{"topic":"a","apns":{"payload":{"aps":{"content-available":-0,"mutable-content":-1}}}}}"#, ["message.apns.payload.aps.mutable-content"]),
        (#"{"message":{"topic":"a","apns":{"payload":{"aps":{"sound":""}}}}}"#, ["message.apns.payload.aps.sound"]),
        (#"{"message":{"topic":"a","apns":{"payload":{"aps":{"sound":{"critical":1,"name":"a","volume":1.5}}}}}}"#, ["message.apns.payload.aps.sound.volume"]),
        (#"{"message":{"topic":"a","apns":{"payload":{"aps":{"sound":{"critical":1,"volume":0.5}}}}}}"#, ["message.apns.payload.aps.sound.name"]),
        (#"{"message":{"topic":"a","apns":{"payload":{"aps":{"content-available":true}}}}}"#, ["message.apns.payload.aps.content-available"]),
        (#"{"message":{"topic":"a","apns":{"payload":{"aps":{"mutable-content":2}}}}}"#, ["message.apns.payload.aps.mutable-content"]),
        (#"{"message":{"topic":"a","apns":{"payload":{"aps":{"interruption-level":"loud"}}}}}"#, ["message.apns.payload.aps.interruption-level"]),
        (#"{"message":{"topic":"a","apns":{"payload":{"aps":{"relevance-score":2}}}}}"#, ["message.apns.payload.aps.relevance-score"]),
        (#"{"message":{"topic":"a","apns":{"payload":{"aps":{"badge":1,"badge":2}}}}}"#, ["body"]),
        (#"{"message":{"topic":"a","apns":{"live_activity_token":""}}}"#, ["message.apns.live_activity_token"]),
        // Webpush
        (#"{"message":{"topic":"a","webpush":{"fcm_options":{"link":"http://example.com"}}}}"#, ["message.webpush.fcm_options.link"]),
        (#"{"message":{"topic":"a","webpush":{"headers":{"TTL":"-5","Urgency":"now"}}}}"#, ["message.webpush.headers.TTL", "message.webpush.headers.Urgency"]),
        (#"{"message":{"topic":"a","webpush":{"notification":{"dir":"up","title":3}}}}"#, ["message.webpush.notification.dir", "message.webpush.notification.title"]),
        (#"{"message":{"topic":"a","webpush":{"data":{"from":"x"}}}}"#, ["message.webpush.data.from"]),
    ] as [(String, [String])])
    func rule(_ body: String, _ expectedFields: [String]) {
        #expect(Set(self.violations(body)) == Set(expectedFields), "\(body)")
    }

    /// Keys are matched to fields by length and first and last eight bytes, then byte by byte past
    /// 16: every field is found in both spellings, and a name differing from one only in a byte
    /// those words do not cover is unknown.
    @Test(arguments: [
        ("android", "restricted_package_name"), ("android", "restricted_satellite_ok"), ("android", "ttl"),
        ("android.notification", "notification_priority"), ("android.notification", "default_vibrate_timings"),
        ("android.notification", "bypass_proxy_notification"), ("android.notification", "notification_count"),
        ("android.notification", "click_action"), ("android.notification", "light_settings"), ("apns", "live_activity_token"),
    ])
    func fieldNamesMatchExactly(object: String, field: String) {
        func body(_ name: String) -> String {
            let nested = object.split(separator: ".").reversed().reduce(#"{"\#(name)":[]}"#) { #"{"\#($1)":\#($0)}"# }
            return #"{"message":{"topic":"a",\#(nested.dropFirst().dropLast())}}"#
        }
        let camelCase = field.split(separator: "_").enumerated().map { $0 == 0 ? String($1) : $1.prefix(1).uppercased() + $1.dropFirst() }.joined()
        for name in [field, camelCase] {
            #expect(self.violations(body(name)) == ["message.\(object).\(field)"], "\(name)")
            var nearMiss = Array(name.utf8)
            nearMiss[nearMiss.count / 2] = UInt8(ascii: "X")
            #expect(self.violations(body(String(decoding: nearMiss, as: UTF8.self))) == ["message.\(object)"], "\(name)")
        }
    }

    @Test func everyViolationIsReportedInOnePass() {
        let fields = self.violations(
            #"{"message":{"topic":"a","data":{"from":"x"},"android":{"ttl":"x","priority":"y"},"apns":{"headers":{"apns-priority":"3"}},"extra":1}}"#
        )
        #expect(fields.count == 5)
    }

    @Test func errorsHaveFCMsShape() throws {
        do {
            _ = try self.parse(#"{"message":{"topic":"a","android":{"ttl":"x"}}}"#)
            Issue.record("expected an error")
        } catch {
            let json = String(decoding: JSONWriter.encode(error.json), as: UTF8.self)
            #expect(json.hasPrefix(#"{"error":{"code":400,"status":"INVALID_ARGUMENT","message":"#))
            #expect(json.contains(#""details":[{"field":"message.android.ttl","description":"#))
        }
    }

    @Test func tokensNeverAppearInErrors() {
        do {
            _ = try self.parse(#"{"message":{"token":"secret-token-123","topic":"a"}}"#)
            Issue.record("expected an error")
        } catch {
            #expect(!String(decoding: JSONWriter.encode(error.json), as: UTF8.self).contains("secret-token-123"))
        }
    }

    // MARK: - Size limits

    func data(bytes: Int) -> String {
        // key "k" (1 byte) + value of bytes-1 bytes.
        #"{"k":"\#(String(repeating: "x", count: bytes - 1))"}"#
    }

    @Test func payloadLimitsAre4096And2048ForTopics() {
        #expect(self.violations(#"{"message":{"token":"\#(Self.token)","data":\#(self.data(bytes: 4096))}}"#) == [])
        #expect(self.violations(#"{"message":{"token":"\#(Self.token)","data":\#(self.data(bytes: 4097))}}"#) == ["message"])
        #expect(self.violations(#"{"message":{"topic":"a","data":\#(self.data(bytes: 2048))}}"#) == [])
        #expect(self.violations(#"{"message":{"topic":"a","data":\#(self.data(bytes: 2049))}}"#) == ["message"])
        #expect(self.violations(#"{"message":{"condition":"'a' in topics","data":\#(self.data(bytes: 2049))}}"#) == ["message"])
        // Notification keys and values count too, in UTF-8: "title" (5) + 1021 x "é" (2042) + "x" = 2048.
        #expect(self.violations(#"{"message":{"topic":"a","notification":{"title":"\#(String(repeating: "é", count: 1021))x"}}}"#) == [])
        #expect(self.violations(#"{"message":{"topic":"a","notification":{"title":"\#(String(repeating: "é", count: 1021))xx"}}}"#) == ["message"])
    }

    /// design.md use case 5: an APNs body of 4096 bytes fits, 4097 does not; VoIP may use 5120.
    @Test func apnsBodyLimit() throws {
        func rendered(customBytes: Int, voip: Bool = false) throws -> RenderedMessage {
            let headers = voip ? #""headers":{"apns-push-type":"voip"},"# : ""
            let body = #"{"message":{"token":"\#(Self.token)","apns":{\#(headers)"payload":{"aps":{"alert":"hi"},"c":"\#(String(repeating: "x", count: customBytes))"}}}}"#
            return RenderedMessage(try self.parse(body).message, acceptedAt: Timestamp(millisecondsSinceEpoch: 0))
        }
        let probe = try rendered(customBytes: 0)
        let overhead = probe.apnsBody.count  // {"aps":{"alert":"hi"},"c":""}
        let exact = try rendered(customBytes: 4096 - overhead)
        #expect(exact.apnsBody.count == 4096)
        #expect(exact.fits(.ios))
        #expect(exact.fits(.android), "the Android recipients of the same send are unaffected")
        let over = try rendered(customBytes: 4097 - overhead)
        #expect(over.apnsBody.count == 4097)
        #expect(!over.fits(.ios))
        let voip = try rendered(customBytes: 5000 - overhead, voip: true)
        #expect(voip.apnsBody.count > 4096 && voip.fits(.ios))
        // Past the rendering buffer's starting size: it grows, keeping what it had written.
        let large = try rendered(customBytes: 5121, voip: true)
        #expect(!large.fits(.ios))
        let expected = #"{"aps":{"alert":"hi"},"c":"\#(String(repeating: "x", count: 5121))"}"#
        #expect(String(decoding: large.apnsBody, as: UTF8.self) == expected)
        #expect(String(decoding: large.androidPayload, as: UTF8.self) == "{}")
    }

    // MARK: - Rendering

    @Test func apnsRenderingAppliesNotificationAndData() throws {
        let request = try self.parse(
            #"{"message":{"token":"\#(Self.token)","notification":{"title":"T","body":"B","image":"https://i/x.png"},"data":{"k":"v"}}}"#
        )
        let body = try JSONParser.parse(RenderedMessage(request.message, acceptedAt: Timestamp(millisecondsSinceEpoch: 0)).apnsBody)
        let expected = try JSONParser.parse(
            Array(#"{"aps":{"alert":{"title":"T","body":"B"},"mutable-content":1},"fcm_options":{"image":"https://i/x.png"},"k":"v"}"#.utf8)
        )
        #expect(body == expected)
    }

    /// The payload's own `aps` keys win: its alert over `notification`'s, its `mutable-content` and
    /// `content-available` not repeated, and a badge or sound alone makes the push visible (so
    /// apns-priority 10 is allowed and no `content-available` is added).
    @Test func apnsRenderingKeepsTheGivenAPSKeys() throws {
        func apnsBody(_ message: String) throws -> String {
            let request = try self.parse(#"{"message":{"token":"\#(Self.token)",\#(message)}}"#)
            return String(decoding: RenderedMessage(request.message, acceptedAt: Timestamp(millisecondsSinceEpoch: 0)).apnsBody, as: UTF8.self)
        }
        #expect(
            try apnsBody(#""notification":{"title":"T","image":"https://i/x.png"},"apns":{"payload":{"aps":{"alert":"own","mutable-content":1},"c":1}}"#)
                == #"{"aps":{"alert":"own","mutable-content":1},"c":1,"fcm_options":{"image":"https://i/x.png"}}"#
        )
        #expect(try apnsBody(#""apns":{"headers":{"apns-priority":"10"},"payload":{"aps":{"badge":3}}}"#) == #"{"aps":{"badge":3}}"#)
        #expect(try apnsBody(#""apns":{"headers":{"apns-priority":"10"},"payload":{"aps":{"sound":"s"}}}"#) == #"{"aps":{"sound":"s"}}"#)
        #expect(
            try apnsBody(#""data":{"k":"v"},"apns":{"headers":{"apns-priority":"5"},"payload":{"aps":{"content-available":1}}}"#)
                == #"{"aps":{"content-available":1},"k":"v"}"#
        )
        #expect(self.violations(#"{"message":{"token":"\#(Self.token)","apns":{"headers":{"apns-priority":"10"},"payload":{"aps":{"category":"c"}}}}}"#) == ["message.apns.headers.apns-priority"])
    }

    /// design.md use case 1: a data message to a topic reaches iOS as a background push.
    @Test func configInvalidationIsABackgroundPushOnIOS() throws {
        let request = try self.parse(
            #"{"message":{"topic":"PUSH_RC","data":{"CONFIG_STATE":"STALE"},"apns":{"headers":{"apns-priority":"5"}}}}"#
        )
        let rendered = RenderedMessage(request.message, acceptedAt: Timestamp(millisecondsSinceEpoch: 0))
        #expect(String(decoding: rendered.apnsBody, as: UTF8.self) == #"{"aps":{"content-available":1},"CONFIG_STATE":"STALE"}"#)
        #expect(String(decoding: rendered.androidPayload, as: UTF8.self) == #"{"data":{"CONFIG_STATE":"STALE"}}"#)
        #expect(String(decoding: rendered.webpushPayload, as: UTF8.self) == #"{"data":{"CONFIG_STATE":"STALE"}}"#)
    }

    /// Header names match in any letter case, and only in letter case: a byte one case bit away
    /// from a hyphen or a digit (`\r` is `-` without it) is another header, which has no rules.
    @Test func headerNamesMatchInAnyLetterCaseOnly() throws {
        func violations(apns headers: String) -> [String] {
            self.violations(#"{"message":{"topic":"a","apns":{"headers":{\#(headers)}}}}"#)
        }
        #expect(violations(apns: #""APNS-PRIORITY":"7""#) == ["message.apns.headers.APNS-PRIORITY"])
        #expect(violations(apns: #""Apns-Push-Type":"nope","aPNs-iD":"x""#) == ["message.apns.headers.Apns-Push-Type", "message.apns.headers.aPNs-iD"])
        #expect(violations(apns: #""APNS-COLLAPSE-ID":"\#(String(repeating: "c", count: 65))""#) == ["message.apns.headers.APNS-COLLAPSE-ID"])
        #expect(violations(apns: #""Apns-Expiration":"soon","APNS-TOPIC":"""#) == ["message.apns.headers.Apns-Expiration", "message.apns.headers.APNS-TOPIC"])
        #expect(violations(apns: #""apns\u000dpriority":"7","apns\u000Did":"x","apns-priority-":"7","apns-collapse-id2":"x""#) == [])
        let webpush = self.violations(#"{"message":{"topic":"a","webpush":{"headers":{"tTl":"-1","URGENCY":"now","Topic":"a b"}}}}"#)
        #expect(webpush == ["message.webpush.headers.tTl", "message.webpush.headers.URGENCY", "message.webpush.headers.Topic"])
        #expect(self.violations(#"{"message":{"topic":"a","webpush":{"headers":{"ttl ":"-1","urgenc":"now"}}}}"#) == [])

        let request = try self.parse(#"{"message":{"topic":"a","apns":{"headers":{"APNS-Collapse-ID":"c","Apns-Priority":"5"}},"webpush":{"headers":{"TOPIC":"t"}}}}"#)
        #expect(request.message.options.apnsCollapseID == "c")
        #expect(request.message.options.apnsPriority == 5)
        #expect(request.message.options.webpushTopic == "t")
    }

    @Test func platformOverridesAndExpiry() throws {
        let request = try self.parse(
            #"{"message":{"token":"\#(Self.token)","data":{"a":"1","b":"2"},"android":{"ttl":"60.5s","collapse_key":"ck","data":{"b":"android"}},"apns":{"headers":{"apns-expiration":"0","apns-collapse-id":"ac"}},"webpush":{"headers":{"TTL":"30"},"data":{"c":"web"}}}}"#
        )
        let accepted = Timestamp(millisecondsSinceEpoch: 1_000_000)
        let rendered = RenderedMessage(request.message, acceptedAt: accepted)
        #expect(String(decoding: rendered.androidPayload, as: UTF8.self) == #"{"data":{"a":"1","b":"android"},"collapse_key":"ck","ttl":"60s"}"#)
        #expect(String(decoding: rendered.webpushPayload, as: UTF8.self) == #"{"data":{"a":"1","b":"2","c":"web"}}"#)
        #expect(rendered.expiry(for: .android) == accepted.advanced(by: .seconds(60)))
        #expect(rendered.expiry(for: .ios) == accepted, "apns-expiration 0 expires at once")
        #expect(rendered.expiry(for: .web) == accepted.advanced(by: .seconds(30)))
        #expect(rendered.collapseKey(for: .android) == "ck")
        #expect(rendered.collapseKey(for: .ios) == "ac")
        #expect(rendered.collapseKey(for: .web) == nil)

        let defaults = RenderedMessage(try self.parse(#"{"message":{"topic":"a"}}"#).message, acceptedAt: accepted)
        #expect(defaults.expiry(for: .android) == accepted.advanced(by: .seconds(2_419_200)))
        #expect(defaults.expiry(for: .ios) == accepted.advanced(by: .seconds(30 * 86_400)))
        #expect(defaults.expiry(for: .web) == accepted.advanced(by: .seconds(2_419_200)))
        // `android.ttl` is Android's: web push keeps its own default of 4 weeks (FCM v1).
        let androidTTL = RenderedMessage(try self.parse(#"{"message":{"topic":"a","android":{"ttl":"60s"}}}"#).message, acceptedAt: accepted)
        #expect(androidTTL.expiry(for: .web) == accepted.advanced(by: .seconds(2_419_200)))
        #expect(androidTTL.headers(for: .web) == [DeliveryHeader(name: "TTL", value: "2419200")])
    }

    /// Overrides merge key by key whatever their size: small objects are matched by comparing keys,
    /// large ones (past 16 keys on both sides) through a dictionary; both against a model, with
    /// keys spelled with escapes that equal plain ones once decoded.
    @Test(arguments: [3, 17, 40] as [Int])
    func overridesMergeKeyByKey(size: Int) throws {
        func object(_ keys: [Int], value: String, escaped: Bool) -> String {
            "{" + keys.map { key in
                let name = escaped && key % 3 == 0 ? #"\u006b\#(key)"# : "k\(key)"  // \u006b is "k"
                return #""\#(name)":"\#(value)\#(key)""#
            }.joined(separator: ",") + "}"
        }
        let data = Array(0..<size)
        let overrides = Array(size / 2..<size + size / 2).reversed().map { $0 }
        let request = try self.parse(
            #"{"message":{"token":"\#(Self.token)","data":\#(object(data, value: "d", escaped: false)),"android":{"data":\#(object(overrides, value: "o", escaped: true))},"apns":{"payload":\#(object(overrides, value: "p", escaped: true))}}}"#
        )
        let rendered = RenderedMessage(request.message, acceptedAt: Timestamp(millisecondsSinceEpoch: 0))
        // Android: the message's keys in order, overridden where the platform gives them, then the platform's other keys.
        let overridden = Set(overrides)
        let android = data.map { ("k\($0)", overridden.contains($0) ? "o\($0)" : "d\($0)") } + overrides.filter { !data.contains($0) }.map { ("k\($0)", "o\($0)") }
        let expectedAndroid = JSONValue.object(JSONObject([.init(key: "data", value: .object(JSONObject(android.map { .init(key: $0.0, value: .string($0.1)) })))]))
        #expect(try JSONParser.parse(rendered.androidPayload) == expectedAndroid)
        // APNs: the payload's keys (after "aps"), then the message's keys the payload does not have.
        guard case .object(let apns) = try JSONParser.parse(rendered.apnsBody) else {
            Issue.record("expected an object")
            return
        }
        let apnsKeys = overrides.map { "k\($0)" } + data.filter { !overridden.contains($0) }.map { "k\($0)" }
        #expect(apns.members.map(\.key) == ["aps"] + apnsKeys)
    }

    /// Android reads proto3 field names: camelCase overrides are rendered snake_case, and an int32
    /// given as a string (proto3 JSON allows it) as a number.
    @Test func androidNotificationOverridesAreRenderedUnderProtoNames() throws {
        let request = try self.parse(
            #"{"message":{"topic":"a","notification":{"title":"T"},"android":{"notification":{"channelId":"c","notificationCount":"3","lightSettings":{"color":{"red":1},"lightOnDuration":"1s","lightOffDuration":"2s"},"title":"override"}}}}"#
        )
        let rendered = RenderedMessage(request.message, acceptedAt: Timestamp(millisecondsSinceEpoch: 0))
        #expect(
            String(decoding: rendered.androidPayload, as: UTF8.self)
                == #"{"notification":{"title":"override","channel_id":"c","notification_count":3,"light_settings":{"color":{"red":1},"light_on_duration":"1s","light_off_duration":"2s"}}}"#
        )
    }

    /// Strings reach the payloads as they were sent, escapes and all, and read back decoded.
    @Test func escapedStringsAreCopiedAsSentAndDecodedOnRequest() throws {
        let request = try self.parse(
            #"{"message":{"topic":"a","data":{"caf\u00e9":"line\nbreak \"q\" \ud83d\ude00"},"notification":{"body":"tab\there"},"apns":{"headers":{"apns-priority":"5","APNS-Collapse-Id":"c\u0031"}}}}"#
        )
        let message = request.message
        let value = "line\nbreak \"q\" 😀"
        #expect(message.data.map(\.key) == ["café"])
        #expect(message.data.map(\.value) == [value])
        #expect(message.notification == Message.Notification(body: "tab\there"))
        #expect(message.apnsHeaders.map(\.key) == ["apns-priority", "APNS-Collapse-Id"])
        #expect(message.options.apnsPriority == 5 && message.options.apnsCollapseID == "c1")
        #expect(message.payloadBytes == "café".utf8.count + value.utf8.count + "body".utf8.count + "tab\there".utf8.count)
        let rendered = RenderedMessage(message, acceptedAt: Timestamp(millisecondsSinceEpoch: 0))
        let web = String(decoding: rendered.webpushPayload, as: UTF8.self)
        #expect(web == #"{"data":{"caf\u00e9":"line\nbreak \"q\" \ud83d\ude00"},"notification":{"body":"tab\there"}}"#)
        let expected = JSONValue.object(
            JSONObject([
                .init(key: "data", value: .object(JSONObject([.init(key: "café", value: .string(value))]))),
                .init(key: "notification", value: .object(JSONObject([.init(key: "body", value: .string("tab\there"))]))),
            ])
        )
        #expect(try JSONParser.parse(rendered.webpushPayload) == expected)
    }

    @Test func targetsOfEveryKind() throws {
        #expect(try self.parse(#"{"message":{"topic":"/topics/news"}}"#).message.target == .topic(TopicName("news")!))
        #expect(try self.parse(#"{"message":{"fid":"eWkQ0JhLD2hnwthI-tkvWz"}}"#).message.target == .fid(FID("eWkQ0JhLD2hnwthI-tkvWz")!))
        #expect(try self.parse(#"{"message":{"user":"ana"}}"#).message.target == .user(UserID("ana")!))
        let multicast = try self.parse(#"{"message":{"tokens":["t1","t2"],"fids":["eWkQ0JhLD2hnwthI-tkvWz"]}}"#).message.target
        #expect(multicast.kind == "multicast")
        let tooMany = "[" + (0..<501).map { "\"t\($0)\"" }.joined(separator: ",") + "]"
        #expect(self.violations(#"{"message":{"tokens":\#(tooMany)}}"#) == ["message.tokens"])
        #expect(try self.parse(#"{"topic":"bare"}"#).message.target == .topic(TopicName("bare")!), "a bare message is accepted")
        #expect(try self.parse(#"{"validate_only":true,"message":{"topic":"a"}}"#).validateOnly)
    }
}
