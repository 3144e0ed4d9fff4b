import FanoutCore
import Foundation
import FanoutTestSupport
import Testing

/// The `fanout` executable's offline commands and exit codes (0 valid, 1 invalid, 2 usage).
@Suite("fanout CLI")
struct FanoutCLITests {
    typealias Outcome = ChildProcess.Outcome

    /// Runs the `fanout` binary built next to this test bundle, with `input` on stdin.
    static func fanout(_ arguments: [String], input: String = "") throws -> Outcome {
        try Self.run(Self.binary("fanout"), arguments, input: input)
    }

    func fanout(_ arguments: String..., input: String = "") throws -> Outcome {
        try Self.fanout(arguments, input: input)
    }

    func fanout(_ arguments: [String], input: String = "") throws -> Outcome {
        try Self.fanout(arguments, input: input)
    }

    /// The path of a product built next to this test bundle (`fanout`, `fanoutd`).
    static func binary(_ name: String) -> String {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent(name).path
    }

    /// Runs `command` to its exit, with `input` on stdin: a path, or a name looked up on PATH
    /// (`python3`, `curl`). Returns its status and everything it wrote; one that runs past
    /// `timeout` is killed and recorded as an issue naming it.
    static func run(_ command: String, _ arguments: [String], input: String = "", timeout: Duration = .seconds(180)) throws -> Outcome {
        let outcome = try ChildProcess.run(command, arguments, input: input, timeout: timeout)
        if outcome.timedOut {
            Issue.record("\((command as NSString).lastPathComponent) \(arguments.prefix(3).joined(separator: " ")) ran past \(timeout) and was killed; it wrote: \(outcome.error.suffix(2000))")
        }
        return outcome
    }

    @Test func conditionCheckPrintsTheCanonicalForm() throws {
        let valid = try self.fanout("condition", "check", "'A' in topics || 'B' in topics && !'C' in topics")
        #expect(valid.status == 0)
        #expect(valid.output == "(('A' in topics || 'B' in topics) && !('C' in topics))\n")

        let invalid = try self.fanout("condition", "check", "'A' in topics ||")
        #expect(invalid.status == 1)
        #expect(invalid.error.hasPrefix("Invalid condition expression provided."))
    }

    @Test func fidGenerateAndCheck() throws {
        let generated = try self.fanout("fid", "generate", "--count", "5")
        #expect(generated.status == 0)
        let fids = generated.output.split(separator: "\n").map(String.init)
        #expect(fids.count == 5)
        for fid in fids {
            #expect(try self.fanout("fid", "check", fid).status == 0)
        }
        #expect(try self.fanout("fid", "check", "ccccccccccc").status == 1)
    }

    @Test func offlineChecksHonourJSON() throws {
        let fid = try self.fanout("fid", "check", "cAECAwQFBgcICQoLDA0ODx", "--json")
        #expect(fid.status == 0 && fid.output == #"{"valid":true,"fid":"cAECAwQFBgcICQoLDA0ODx"}"# + "\n")
        let badFID = try self.fanout("fid", "check", "nope", "--json")
        #expect(badFID.status == 1 && badFID.output.hasPrefix(#"{"error":{"code":400,"status":"INVALID_ARGUMENT","message":"invalid FID"#))
        #expect(try self.fanout("topic", "check", "/topics/news", "--json").output == #"{"valid":true,"topic":"news"}"# + "\n")
        #expect(try self.fanout("condition", "check", "'a' in topics", "--json").output == #"{"valid":true,"condition":"'a' in topics"}"# + "\n")
        let badCondition = try self.fanout("condition", "check", "'a' in", "--json")
        #expect(badCondition.status == 1 && badCondition.output.contains(#""field":"condition""#))
        let generated = try self.fanout("fid", "generate", "--count", "2", "--json")
        #expect(generated.output.hasPrefix("[\"") && generated.output.split(separator: ",").count == 2)
    }

    @Test func topicCheckStripsThePrefix() throws {
        let valid = try self.fanout("topic", "check", "/topics/news")
        #expect(valid.status == 0 && valid.output == "news\n")
        #expect(try self.fanout("topic", "check", "/topics/private/x").status == 1)
    }

    @Test func usageErrorsExitWith2() throws {
        #expect(try self.fanout("fid", "generate", "--count", "0").status == 2)
        #expect(try self.fanout("condition", "check").status == 2)
        #expect(try self.fanout("no-such-command").status == 2)
    }

    @Test func demoRuns() throws {
        let demo = try self.fanout("demo")
        #expect(demo.status == 0)
        #expect(demo.output.contains("reaches 2 installations"))
        #expect(demo.output.contains("old token: UNREGISTERED"))
    }

    @Test func validateReadsStdinAndFiles() throws {
        let valid = try self.fanout("validate", input: #"{"message":{"topic":"news","data":{"k":"v"}}}"#)
        #expect(valid.status == 0)
        #expect(valid.output == #"{"valid":true,"target":{"kind":"topic","value":"news"},"payloadBytes":2,"limitBytes":2048}"# + "\n")

        let invalid = try self.fanout("validate", "-", input: #"{"message":{"topic":"news","android":{"ttl":"5 weeks"}}}"#)
        #expect(invalid.status == 1)
        #expect(invalid.output.contains(#""field":"message.android.ttl""#))
        #expect(invalid.output.hasPrefix(#"{"error":{"code":400,"status":"INVALID_ARGUMENT""#))

        let path = FileManager.default.temporaryDirectory.appendingPathComponent("fanout-validate-\(getpid()).json").path
        try Data(#"{"message":{"token":"t:APA91b","apns":{"payload":{"aps":{"alert":"\#(String(repeating: "x", count: 4100))"}}}}}"#.utf8)
            .write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(try self.fanout("validate", path).status == 0)
        #expect(try self.fanout("validate", path, "--platform", "android").status == 0)
        let ios = try self.fanout("validate", path, "--platform", "ios")
        #expect(ios.status == 1)
        #expect(ios.output.contains("rendered ios payload"))
        #expect(!ios.output.contains("APA91b"), "tokens are never printed")

        #expect(try self.fanout("validate", "/nonexistent/body.json").status == 2)
        #expect(try self.fanout("validate", "--platform", "symbian", input: "{}").status == 2)
    }

    @Test func walInspectVerifyRepair() throws {
        let directory = TemporaryDirectory.path("fanout-wal")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        #expect(try Self.run(Self.binary("fanout-crash-child"), [directory, "5", "0", "40"]).status == 0)

        let inspect = try self.fanout("wal", "inspect", directory)
        #expect(inspect.status == 0)
        #expect(inspect.output.contains("0 register default fid="))
        #expect(!inspect.output.contains("APA91b"), "tokens are redacted")
        #expect(try self.fanout("wal", "verify", directory).output.contains("40 records"))
        let inspectJSON = try self.fanout("wal", "inspect", directory, "--json").output.split(separator: "\n")
        #expect(inspectJSON.first?.hasPrefix(#"{"segment":"segment-"#) == true)
        #expect(inspectJSON.contains { $0.hasPrefix(#"{"lsn":0,"record":"register default fid="#) })
        #expect(try self.fanout("wal", "verify", directory, "--json").output.hasPrefix(#"{"clean":true,"segments":"#))

        // Flip a bit in the middle of the log.
        let segment = try #require(try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".wal") }.sorted().first)
        let path = "\(directory)/\(segment)"
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        bytes[bytes.count / 2] ^= 0x01
        try bytes.write(to: URL(fileURLWithPath: path))
        let damaged = try self.fanout("wal", "verify", directory)
        #expect(damaged.status == 1)
        #expect(damaged.output.contains("checksum"))
        let damagedJSON = try self.fanout("wal", "verify", directory, "--json")
        #expect(damagedJSON.status == 1 && damagedJSON.output.hasPrefix(#"{"clean":false,"#) && damagedJSON.output.contains("checksum"))
        let dryJSON = try self.fanout("wal", "repair", directory, "--dry-run", "--json")
        #expect(dryJSON.status == 0 && dryJSON.output.contains(#""applied":false"#), "\(dryJSON.output)")

        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let dry = try self.fanout("wal", "repair", directory, "--dry-run")
        #expect(dry.status == 0 && dry.output.contains("would cut \(segment) at byte"), "\(dry.output)")
        #expect(dry.output.contains("are lost"))
        let unconfirmed = try self.fanout("wal", "repair", directory)
        #expect(unconfirmed.status == 1, "a repair that drops records needs --truncate-at-corruption")
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "neither changed the segment")
        let repair = try self.fanout("wal", "repair", directory, "--truncate-at-corruption")
        #expect(repair.status == 0 && repair.output.contains("cut \(segment) at byte"), "\(repair.output)")
        #expect(repair.output.contains("quarantine/"))
        let clean = try self.fanout("wal", "verify", directory)
        #expect(clean.status == 0)
        #expect(!clean.output.contains("40 records"), "records after the damage are gone")
    }

    @Test func sendAndPendingWorkOnADataDirectory() async throws {
        let directory = TemporaryDirectory.path("fanout-cli")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let engine = try Engine(directory: directory, durability: .always)
        let phone = try await engine.register(RegistrationRequest(token: RegistrationToken("cli-token"), platform: .ios, appID: AppID("app")!)).installation
        _ = try await engine.subscribe([phone.fid.string].addresses, to: TopicName("news")!)
        try engine.close()

        let sent = try self.fanout("send", "--data-dir", directory, "-", input: #"{"message":{"topic":"news","notification":{"title":"Hi"}}}"#)
        #expect(sent.status == 0, "\(sent.error)")
        #expect(sent.output.hasPrefix(#"{"name":"projects/default/messages/1","audience":1,"enqueued":1,"recipients":[],"platforms":[{"platform":"android","#))
        let report = try #require(try JSONSerialization.jsonObject(with: Data(sent.output.utf8)) as? [String: Any])
        let ios = try #require((report["platforms"] as? [[String: Any]])?[1])
        #expect(ios["platform"] as? String == "ios" && ios["audience"] as? Int == 1 && ios["enqueued"] as? Int == 1 && ios["limitBytes"] as? Int == 4096)
        #expect(ios["renderedBytes"] as? Int == #"{"aps":{"alert":{"title":"Hi"}}}"#.utf8.count)
        let multicast = try self.fanout("send", "--data-dir", directory, input: #"{"message":{"tokens":["cli-token","gone"],"data":{"k":"v"}}}"#)
        #expect(multicast.output.contains(
            #""recipients":[{"status":"ok"},{"status":"UNREGISTERED","field":"message.tokens[1]","description":"no installation has this registration"#
        ), "\(multicast.output)")

        let pending = try self.fanout("pending", "--data-dir", directory, phone.fid.string)
        #expect(pending.status == 0)
        let lines = pending.output.split(separator: "\n")
        #expect(lines.count == 3)
        #expect(lines.first?.hasPrefix("1.\(phone.slot) projects/default/messages/1 ios expires=") == true)
        #expect(lines.last == "# 2 pending")
        #expect(!pending.output.contains("cli-token") && !pending.output.contains("Hi"), "no tokens or payloads")

        let invalid = try self.fanout("send", "--data-dir", directory, input: #"{"message":{"topic":"news","data":{"from":"x"}}}"#)
        #expect(invalid.status == 1)
        #expect(invalid.output.contains(#""field":"message.data.from""#))
        #expect(try self.fanout("send", "--data-dir", directory, "--project", "no-such-project", input: #"{"message":{"topic":"news"}}"#).status == 1)
        #expect(try self.fanout("pending", "--data-dir", directory, "not a fid").status == 2)
        #expect(try self.fanout("pending", "--data-dir", directory, "cAECAwQFBgcICQoLDA0ODx").status == 1)
    }
}
