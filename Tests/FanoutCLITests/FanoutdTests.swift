import FanoutCore
import Foundation
import FanoutTestSupport
import Testing

/// `fanoutd` as users run it, driven by the `fanout` CLI: first start prints a key, every
/// networked subcommand works, SIGTERM shuts down gracefully, a restart keeps the state.
@Suite("fanoutd and the networked CLI")
struct FanoutdTests {
    /// A running `fanoutd` child process. (Sendable so that an async test can start it on a
    /// thread of its own, `onOwnThread`.)
    final class Daemon: Sendable {
        let child: ChildProcess
        let port: Int

        init(directory: String, arguments: [String] = []) throws {
            self.child = try ChildProcess(
                FanoutCLITests.binary("fanoutd"),
                ["--data-dir", directory, "--listen", "127.0.0.1:0", "--snapshot-every", "0"] + arguments
            )
            // The log line `... address=127.0.0.1:PORT ... [fanoutd] listening` says it serves. Not
            // any line ending in "listening": with --http, `[fanoutd] HTTP front listening` can
            // come first, and its port is the HTTP front's (seen: the CLI then spoke the binary
            // protocol to it and read "HTTP/1.1" as protocol version 72).
            var port: Int?
            self.child.wait(for: .seconds(180)) { seen in
                port = Self.listenerPort(in: seen.errorText)
                return port != nil
            }
            guard let port else {
                let seen = self.child.current
                self.child.kill()
                throw FanoutError(.unavailable, "fanoutd \(seen.hasExited ? "exited" : "ran 180 s") before it listened: \(seen.errorText.suffix(4000))")
            }
            self.port = port
        }

        var process: Process { self.child.process }

        /// The log lines it has written so far.
        var logLines: [String] { self.child.current.errorText.components(separatedBy: "\n") }

        /// The binary protocol listener's port, from its `[fanoutd] listening` log line.
        static func listenerPort(in log: String) -> Int? {
            Self.port(in: log, after: "] listening")
        }

        /// The port on the first log line ending in `suffix` that names `address=127.0.0.1:PORT`.
        private static func port(in log: String, after suffix: String) -> Int? {
            for line in log.split(separator: "\n") where line.hasSuffix(suffix) {
                if let range = line.range(of: "address=127.0.0.1:"), let port = Int(line[range.upperBound...].prefix(while: \.isNumber)) {
                    return port
                }
            }
            return nil
        }

        /// The HTTP front's port, from its `HTTP front listening` log line (with `--http 127.0.0.1:0`).
        func httpPort() -> Int? {
            guard self.waitForLogLine(containing: "HTTP front listening") else { return nil }
            return Self.port(in: self.child.current.errorText, after: "HTTP front listening")
        }

        /// Waits (at most 120 s) until its log has `occurrence` lines containing `text`; false if
        /// it exits or the time runs out first.
        func waitForLogLine(containing text: String, occurrence: Int = 1) -> Bool {
            self.child.wait(for: .seconds(120)) { seen in
                seen.errorText.split(separator: "\n").filter { $0.contains(text) }.count >= occurrence
            }
        }

        /// Sends SIGTERM and waits (at most 120 s, then SIGKILL, recorded as an issue); returns the
        /// exit status and everything it wrote.
        func stop() -> (status: Int32, output: String, error: String) {
            self.child.terminate()
            if !self.child.waitForExit(within: .seconds(120)) {
                Issue.record("fanoutd did not exit within 120 s of SIGTERM; killed")
            }
            let seen = self.child.current
            return (self.child.status ?? -1, seen.outputText, seen.errorText)
        }
    }

    func fanout(_ port: Int, _ key: String, _ arguments: String..., input: String = "") throws -> FanoutCLITests.Outcome {
        try FanoutCLITests.fanout(arguments + ["--server", "127.0.0.1:\(port)", "--api-key", key], input: input)
    }

    /// Runs fanoutd to its exit (for starts that fail).
    static func fanoutd(_ arguments: [String]) throws -> FanoutCLITests.Outcome {
        try FanoutCLITests.run(FanoutCLITests.binary("fanoutd"), arguments)
    }

    /// The admin key a first start leaves in DATA_DIR/admin-key (the key file keeps only its hash).
    static func adminKey(in directory: String) throws -> String {
        let keyFile = try String(contentsOfFile: directory + "/api-keys", encoding: .utf8)
        #expect(keyFile.contains("admin admin * sha256:"), "the key file holds the key's hash")
        let key = try String(contentsOfFile: directory + "/admin-key", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(!keyFile.contains(key), "never the key itself")
        return key
    }

    @Test func everyNetworkedSubcommandAgainstARunningServer() throws {
        let directory = TemporaryDirectory.path("fanoutd")
        defer { try? FileManager.default.removeItem(atPath: directory) }

        let daemon = try Daemon(directory: directory)
        let key = try Self.adminKey(in: directory)
        let port = daemon.port

        #expect(try self.fanout(port, key, "project", "create", "shop-app").status == 0)
        #expect(try self.fanout(port, key, "project", "list").output == "default\nshop-app\n")

        let android = try self.fanout(port, key, "register", "--platform", "android", "--app-id", "1:1:android:a", "--token", "cli-android-token", "--json")
        #expect(android.status == 0, "\(android.error)")
        #expect(android.output.contains(#""token":"cli-android-token""#))
        let ios = try self.fanout(port, key, "register", "--platform", "ios", "--app-id", "1:1:ios:a", "--token", "cli-ios-token")
        #expect(ios.status == 0)
        #expect(!ios.output.contains("cli-ios-token"), "the human form does not print tokens")

        let subscribed = try self.fanout(port, key, "subscribe", "news", "cli-android-token", "cli-ios-token")
        #expect(subscribed.output == "subscribed 2 of 2 to news\n")
        // From a file, with one registration the server refuses (by position, without the token).
        let partly = try self.fanout(port, key, "subscribe", "sports", "--file", "-", input: "cli-ios-token\nnot registered\n")
        #expect(partly.status == 1)
        #expect(partly.error.contains("registration #2: INVALID_ARGUMENT"))
        #expect(try self.fanout(port, key, "topics").output == "news 2\nsports 1\n")

        // An import from a CSV file (in another project, to keep the counts below): the CLI's
        // defaults fill empty cells, the server refuses one line, the CLI cannot read another,
        // a repeated line is already there; refusals are listed by line number.
        let csv = """
            token,platform,appId,deviceName
            csv-1,android,1:1:android:a,"Pixel, 8"
            csv-2,,,
            csv-3,web,has space,
            csv-4,tv,,
            csv-1,android,1:1:android:a,"Pixel, 8"

            """
        let imported = try self.fanout(port, key, "register", "--project", "shop-app", "--platform", "web", "--app-id", "1:1:web:a", "--file", "-", input: csv)
        #expect(imported.status == 1)
        #expect(imported.output == "registered 2 new and 1 already there, of 5 lines; refused 2: INVALID_ARGUMENT 1, UNREADABLE 1\n")
        #expect(imported.error.contains("line 4: INVALID_ARGUMENT") && imported.error.contains("(appId)"), "\(imported.error)")
        #expect(imported.error.contains("line 5: platform must be android, ios or web"))
        #expect(!imported.error.contains("csv-"), "never the tokens")
        #expect(try self.fanout(port, key, "installation", "csv-1", "--project", "shop-app", "--json").output.contains(#""deviceName":"Pixel, 8""#))
        let lines = try self.fanout(port, key, "register", "--project", "shop-app", "--file", "-", "--json", input: #"{"token":"jl-1","platform":"ios","appId":"1:1:ios:a"}"# + "\n" + #"{"token":"jl-2"}"# + "\n")
        #expect(lines.status == 1)
        #expect(lines.output == #"{"lines":2,"registered":1,"existing":0,"refused":1,"failed":{"UNREADABLE":1}}"# + "\n")
        let badHeader = try self.fanout(port, key, "register", "--project", "shop-app", "--file", "-", input: "token,colour\nx,red\n")
        #expect(badHeader.status == 2 && badHeader.error.contains("unknown column \"colour\""), "\(badHeader.error)")
        #expect(try self.fanout(port, key, "topics", "cli-ios-token").output == "news\nsports\n")

        let bound = try self.fanout(port, key, "user", "bind", "cli-ios-token", "alice")
        #expect(bound.output.contains("user=alice"))
        #expect(try self.fanout(port, key, "user", "devices", "alice").output.hasPrefix("alice 1 device(s)"))

        let sent = try self.fanout(port, key, "send", input: #"{"message":{"topic":"news","data":{"k":"v"}}}"#)
        #expect(sent.output.hasPrefix("projects/default/messages/1 audience=2 enqueued=2\n"), "\(sent.error)")
        let refused = try self.fanout(port, key, "send", "--json", input: #"{"message":{"topic":"news","data":{"from":"x"}}}"#)
        #expect(refused.status == 1)
        #expect(refused.output.contains(#""field":"message.data.from""#))

        let pending = try self.fanout(port, key, "pending", "cli-android-token")
        #expect(pending.output.hasSuffix("# 1 pending\n"))
        let tail = try self.fanout(port, key, "tail", "--platform", "android", "--count", "1", "--json")
        #expect(tail.status == 0, "\(tail.error)")
        #expect(tail.output.contains(#""platform":"android""#))
        #expect(tail.output.contains(#"\"k\":\"v\""#))
        #expect(try self.fanout(port, key, "pending", "cli-android-token").output == "# 0 pending\n")
        let stats = try self.fanout(port, key, "stats", "--json")
        #expect(stats.output.contains(#""installations":2"#))
        #expect(stats.output.contains(#""acknowledged":1"#))
        #expect(stats.output.contains(#""rejected":0,"skipped":0,"#), "\(stats.output)")

        // The rest of the operations.
        #expect(try self.fanout(port, key, "touch", "cli-ios-token").output.contains("user=alice"))
        #expect(try self.fanout(port, key, "stale").output == "# 0 stale\n")
        #expect(try self.fanout(port, key, "prune", "--json").output == #"{"deleted":0}"# + "\n")
        #expect(try self.fanout(port, key, "expire").output == "0 expired\n")
        #expect(try self.fanout(port, key, "user", "cleanup").output == "")
        #expect(try self.fanout(port, key, "audience", "--condition", "'news' in topics && 'sports' in topics").output == "1 installations\n")
        #expect(try self.fanout(port, key, "audience", "--topic", "news", "--user", "alice").status == 2)
        let snapshot = try self.fanout(port, key, "snapshot")
        #expect(snapshot.status == 0 && snapshot.output.hasPrefix("wrote "), "\(snapshot.error)")
        #expect(try self.fanout(port, key, "snapshot", "--json").output.hasPrefix(#"{"snapshot":"snapshot-"#))

        // A client written from docs/wire-protocol.md alone (Python, standard library only).
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../scripts/wire-client-example.py").standardized.path
        let python = try FanoutCLITests.run("python3", [script, "127.0.0.1", String(port), key, "python-token"])
        let printed = python.output
        #expect(python.status == 0)
        #expect(printed.contains(#""acknowledged": 1"#), "\(printed)")
        #expect(printed.contains(#""audience": 1"#))
        #expect(printed.contains(#""payload": {"data": {"from-python": "yes"}}"#))
        #expect(printed.contains(#""subscribe": [0]"#))
        #expect(printed.contains(#""deliveredToken": "python-token""#))
        #expect(printed.contains(#""headers": {"TTL": "2419200"}"#))

        // A refused key is the server's answer: exit 1, and FCM's error object under --json.
        #expect(try self.fanout(port, "wrong-key-000000000000", "stats").status == 1)
        let refusedKey = try self.fanout(port, "wrong-key-000000000000", "stats", "--json")
        #expect(refusedKey.status == 1)
        #expect(refusedKey.output.hasPrefix(#"{"error":{"code":401,"status":"UNAUTHENTICATED","message":"#), "\(refusedKey.output)")
        let missing = try self.fanout(port, key, "installation", "no-such-token", "--json")
        #expect(missing.status == 1 && missing.output.hasPrefix(#"{"error":{"code":404,"status":"NOT_FOUND","#), "\(missing.output)")
        #expect(try self.fanout(port, key, "project", "create", "json-project", "--json").output == #"{"project":"json-project","created":true}"# + "\n")
        let pendingJSON = try self.fanout(port, key, "pending", "cli-ios-token", "--json")
        #expect(pendingJSON.output.hasPrefix(#"{"id":"#) && pendingJSON.output.contains(#""platform":"ios","expiry":"20"#), "\(pendingJSON.output)")
        #expect(try self.fanout(0, key, "stats").status == 2, "no server there: a connection error")
        #expect(try self.fanout(port, key, "installation", "no-such-token").status == 1)

        let stopped = daemon.stop()
        #expect(stopped.status == 0)
        #expect(stopped.output.contains(key), "the first start prints the key")
        #expect(stopped.error.contains("stopped; the log is synced"))

        // A restart: no new key, the same state.
        let again = try Daemon(directory: directory)
        let installation = try self.fanout(again.port, key, "installation", "cli-ios-token", "--json")
        #expect(installation.output.contains(#""topics":["news","sports"]"#), "\(installation.error)")
        #expect(installation.output.contains(#""user":"alice""#))
        #expect(try self.fanout(again.port, key, "pending", "cli-ios-token").output.hasSuffix("# 1 pending\n"))
        let restarted = again.stop()
        #expect(restarted.status == 0)
        #expect(!restarted.output.contains(key))
    }

    @Test func aTakenAddressFailsBeforeAnythingIsCreated() throws {
        let directory = TemporaryDirectory.path("fanoutd-taken")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let holder = try Daemon(directory: directory + "-holder")
        defer {
            _ = holder.stop()
            try? FileManager.default.removeItem(atPath: directory + "-holder")
        }
        let outcome = try Self.fanoutd(["--data-dir", directory, "--listen", "127.0.0.1:\(holder.port)"])
        #expect(outcome.status == 1)
        #expect(outcome.error.contains("cannot listen on 127.0.0.1:\(holder.port): Address already in use"), "\(outcome.error)")
        #expect(outcome.output.isEmpty, "no key printed")
        #expect(!FileManager.default.fileExists(atPath: directory), "no data directory created")
    }

    /// `--malloc-policy` takes compact (the default) or glibc; anything else is refused before
    /// anything is created.
    @Test func theMallocPolicyIsCheckedAndEitherServes() throws {
        let directory = TemporaryDirectory.path("fanoutd-malloc")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let refused = try Self.fanoutd(["--data-dir", directory, "--listen", "127.0.0.1:0", "--malloc-policy", "jemalloc"])
        #expect(refused.status != 0)
        #expect(refused.error.contains("--malloc-policy must be compact or glibc"), "\(refused.error)")
        #expect(!FileManager.default.fileExists(atPath: directory), "no data directory created")
        // It serves (the daemon throws if it never listens), and SIGTERM right after "listening"
        // is a graceful shutdown: the signals are trapped before fanoutd says it listens.
        let daemon = try Daemon(directory: directory, arguments: ["--malloc-policy", "glibc"])
        let stopped = daemon.stop()
        #expect(stopped.status == 0, "\(stopped.error.suffix(2000))")
        #expect(stopped.error.contains("stopped; the log is synced"))
    }

    /// A ready file that cannot be written ends fanoutd with an error (after it shut down).
    @Test func anUnwritableReadyFileFails() throws {
        let directory = TemporaryDirectory.path("fanoutd-ready")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let outcome = try Self.fanoutd(["--data-dir", directory, "--listen", "127.0.0.1:0", "--ready-file", directory + "/no-such-dir/ready"])
        #expect(outcome.status != 0)
        #expect(outcome.error.contains("cannot write the ready file"), "\(outcome.error.suffix(2000))")
    }

    /// `fanout key` edits the key file; SIGHUP makes fanoutd use it: a created sender key works
    /// within its role, a revoked key stops working, and the admin's connection is not disturbed.
    @Test func keysAreCreatedAndRevokedAndSIGHUPAppliesThem() throws {
        let directory = TemporaryDirectory.path("fanoutd-keys")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let daemon = try Daemon(directory: directory)
        defer { _ = daemon.stop() }
        let admin = try Self.adminKey(in: directory)
        let file = ["--file", directory + "/api-keys"]

        let created = try FanoutCLITests.fanout(["key", "create", "--name", "billing", "--role", "sender", "--projects", "default", "--json"] + file)
        #expect(created.status == 0, "\(created.error)")
        let entry = try #require(try JSONSerialization.jsonObject(with: Data(created.output.utf8)) as? [String: Any])
        let sender = try #require(entry["key"] as? String)
        #expect(entry["role"] as? String == "sender" && entry["projects"] as? [String] == ["default"])
        #expect(!(try String(contentsOfFile: directory + "/api-keys", encoding: .utf8)).contains(sender), "the file keeps the hash")
        #expect(try FanoutCLITests.fanout(["key", "create", "--name", "billing", "--role", "admin"] + file).status == 1, "a taken name")
        #expect(try FanoutCLITests.fanout(["key", "list"] + file).output == "admin\tadmin\t*\nbilling\tsender\tdefault\n")

        #expect(try self.fanout(daemon.port, sender, "stats", "--role", "sender").status == 1, "not loaded before SIGHUP")
        kill(daemon.process.processIdentifier, SIGHUP)
        // The reload is asynchronous: wait for its log line (the daemon's stderr).
        #expect(daemon.waitForLogLine(containing: "keys reloaded"))
        let stats = try self.fanout(daemon.port, sender, "stats", "--role", "sender")
        #expect(stats.status == 0, "\(stats.error)")
        let refused = try self.fanout(daemon.port, sender, "project", "create", "news", "--role", "sender", "--json")
        #expect(refused.status == 1 && refused.output.contains("PERMISSION_DENIED"), "\(refused)")

        #expect(try FanoutCLITests.fanout(["key", "revoke", "billing"] + file).status == 0)
        #expect(try FanoutCLITests.fanout(["key", "revoke", "billing"] + file).status == 1, "no such key")
        kill(daemon.process.processIdentifier, SIGHUP)
        #expect(daemon.waitForLogLine(containing: "keys reloaded", occurrence: 2))
        let revoked = try self.fanout(daemon.port, sender, "stats", "--role", "sender", "--json")
        #expect(revoked.status == 1 && revoked.output.contains("UNAUTHENTICATED"), "\(revoked)")
        #expect(try self.fanout(daemon.port, admin, "stats").status == 0)
    }

    /// `fanout tls dev-cert`, fanoutd with --tls-cert/--tls-key, and the CLI with --tls-ca (and
    /// FANOUT_TLS_CA); plain TCP is refused off loopback unless asked for.
    @Test func tlsFromADevelopmentCertificateToTheCLI() throws {
        let directory = TemporaryDirectory.path("fanoutd-tls")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let certificates = directory + "/tls"
        let made = try FanoutCLITests.fanout(["tls", "dev-cert", certificates, "--json"])
        #expect(made.status == 0, "\(made.error)")
        let key = try FileManager.default.attributesOfItem(atPath: certificates + "/key.pem")
        #expect((key[.posixPermissions] as? Int) == 0o600)
        #expect(try FanoutCLITests.fanout(["tls", "dev-cert", certificates]).status == 1, "no overwrite without --force")

        let daemon = try Daemon(directory: directory + "/data", arguments: ["--tls-cert", certificates + "/cert.pem", "--tls-key", certificates + "/key.pem"])
        defer { _ = daemon.stop() }
        let admin = try Self.adminKey(in: directory + "/data")
        let secure = try self.fanout(daemon.port, admin, "project", "create", "shop-app", "--tls-ca", certificates + "/cert.pem")
        #expect(secure.status == 0, "\(secure.error)")
        let plain = try self.fanout(daemon.port, admin, "project", "list")
        #expect(plain.status == 2, "plain TCP to a TLS port: \(plain)")
        let system = try self.fanout(daemon.port, admin, "project", "list", "--tls")
        #expect(system.status == 2 && system.error.contains("CERTIFICATE_VERIFY_FAILED"), "the system's roots do not know a dev certificate: \(system)")

        // Off loopback, plain TCP needs --insecure-plaintext.
        let refused = try Self.fanoutd(["--data-dir", directory + "/other", "--listen", "0.0.0.0:0"])
        #expect(refused.status != 0 && refused.error.contains("--insecure-plaintext"), "\(refused)")
        #expect(!FileManager.default.fileExists(atPath: directory + "/other"), "refused before anything is created")
    }

    /// The HTTP front with the TCP listener's TLS options: HTTP/2 by ALPN, HTTP/1.1 otherwise,
    /// checked with curl (a client that is not ours); plain HTTP to it fails.
    @Test func theHTTPFrontServesTLSWithHTTP2() throws {
        let directory = TemporaryDirectory.path("fanoutd-https")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let certificates = directory + "/tls"
        #expect(try FanoutCLITests.fanout(["tls", "dev-cert", certificates]).status == 0)
        let daemon = try Daemon(directory: directory + "/data", arguments: [
            "--tls-cert", certificates + "/cert.pem", "--tls-key", certificates + "/key.pem", "--http", "127.0.0.1:0",
        ])
        defer { _ = daemon.stop() }
        let httpPort = try #require(daemon.httpPort())
        #expect(daemon.logLines.contains { $0.contains("HTTP front listening") && $0.contains("tls=on") })
        func curl(_ arguments: String...) throws -> FanoutCLITests.Outcome {
            try FanoutCLITests.run("curl", ["--silent", "--show-error", "--max-time", "20"] + arguments)
        }
        let url = "https://localhost:\(httpPort)/healthz"
        let h2 = try curl("--cacert", certificates + "/cert.pem", "--http2", "--write-out", " %{http_version} %{http_code}", url)
        #expect(h2.output == #"{"status":"ok"} 2 200"#, "\(h2)")
        let h1 = try curl("--cacert", certificates + "/cert.pem", "--http1.1", "--write-out", " %{http_version} %{http_code}", url)
        #expect(h1.output == #"{"status":"ok"} 1.1 200"#, "\(h1)")
        // A send over each: served on the event loop by the front's channel handler, behind HTTP/2's
        // stream codec as behind HTTP/1.1's.
        let admin = try Self.adminKey(in: directory + "/data")
        for version in ["--http2", "--http1.1"] {
            let sent = try curl(
                "--cacert", certificates + "/cert.pem", version, "--write-out", " %{http_code}",
                "--header", "Authorization: Bearer \(admin)", "--data", #"{"validate_only":true,"message":{"topic":"news"}}"#,
                "https://localhost:\(httpPort)/v1/projects/default/messages:send"
            )
            #expect(sent.output.hasSuffix(#""projects/default/messages/fake_message_id"} 200"#), "\(version): \(sent)")
        }
        let untrusted = try curl(url)
        #expect(untrusted.status != 0, "the system's roots do not know a dev certificate: \(untrusted)")
        let plain = try curl("http://localhost:\(httpPort)/healthz")
        #expect(plain.status != 0 || !plain.output.contains("ok"), "plain HTTP to the TLS port: \(plain)")
    }

    /// A device through the CLI: `register --credentials`, then subcommands with `--auth-token`
    /// on its own installation only; a new auth token by `--refresh-token`; the JWK Set.
    @Test func aDeviceActsOnItselfThroughTheCLI() throws {
        let directory = TemporaryDirectory.path("fanoutd-device")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let daemon = try Daemon(directory: directory)
        defer { _ = daemon.stop() }
        let admin = try Self.adminKey(in: directory)
        let registered = try self.fanout(daemon.port, admin, "register", "--platform", "web", "--app-id", "1:1:web:a", "--token", "cli-device-1", "--credentials", "--json")
        #expect(registered.status == 0, "\(registered.error)")
        let lines = registered.output.split(separator: "\n").map { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let credentials = try #require(lines.last ?? nil)
        let fid = try #require(credentials["fid"] as? String)
        let auth = try #require(credentials["authToken"] as? String)
        let refresh = try #require(credentials["refreshToken"] as? String)
        #expect(try self.fanout(daemon.port, admin, "register", "--platform", "web", "--app-id", "1:1:web:a", "--token", "cli-device-2").status == 0)

        let device = ["--server", "127.0.0.1:\(daemon.port)", "--auth-token", auth]
        #expect(try FanoutCLITests.fanout(["subscribe", "PUSH_RC", fid] + device).status == 0)
        #expect(try FanoutCLITests.fanout(["topics", fid] + device).output == "PUSH_RC\n")
        let other = try FanoutCLITests.fanout(["topics", "cli-device-2", "--json"] + device)
        #expect(other.status == 1 && other.output.contains("PERMISSION_DENIED"), "\(other)")
        let send = try FanoutCLITests.fanout(["send", "--json"] + device, input: #"{"message":{"topic":"PUSH_RC","data":{"a":"b"}}}"#)
        #expect(send.status == 1 && send.output.contains("PERMISSION_DENIED"), "\(send)")

        let renewed = try FanoutCLITests.fanout(["auth", "token", fid, "--server", "127.0.0.1:\(daemon.port)", "--refresh-token", refresh])
        #expect(renewed.status == 0 && renewed.output.split(separator: ".").count == 3, "\(renewed)")
        let jwks = try FanoutCLITests.fanout(["auth", "jwks"] + device)
        #expect(jwks.status == 0 && jwks.output.contains(#""kty":"EC""#) && jwks.output.contains(#""alg":"ES256""#))
        let forged = try FanoutCLITests.fanout(["topics", fid, "--server", "127.0.0.1:\(daemon.port)", "--auth-token", auth + "x", "--json"])
        #expect(forged.status == 1 && forged.output.contains("UNAUTHENTICATED") && !forged.output.contains(auth), "\(forged)")
    }

    /// `fanout project legacy-ids on`: a registration keeps its 11-character Instance ID, which
    /// names it in later subcommands and in a send's `fid`.
    @Test func legacyInstanceIDsAreAProjectSetting() throws {
        let directory = TemporaryDirectory.path("fanoutd-legacy")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let daemon = try Daemon(directory: directory)
        defer { _ = daemon.stop() }
        let admin = try Self.adminKey(in: directory)
        let off = try self.fanout(daemon.port, admin, "register", "--platform", "android", "--app-id", "1:1:android:a", "--token", "legacy-1", "--fid", "cAbCdEf0123", "--json")
        #expect(off.status == 0 && !off.output.contains(#""fid":"cAbCdEf0123""#), "off: the server assigns a FID")
        #expect(try self.fanout(daemon.port, admin, "project", "legacy-ids", "on").output == "default: legacy Instance IDs accepted\n")
        let on = try self.fanout(daemon.port, admin, "register", "--platform", "android", "--app-id", "1:1:android:a", "--token", "legacy-2", "--fid", "cAbCdEf0123", "--json")
        #expect(on.status == 0 && on.output.contains(#""fid":"cAbCdEf0123""#), "\(on)")
        #expect(try self.fanout(daemon.port, admin, "subscribe", "news", "cAbCdEf0123").status == 0)
        #expect(try self.fanout(daemon.port, admin, "topics", "cAbCdEf0123").output == "news\n")
        let sent = try self.fanout(daemon.port, admin, "send", "--json", input: #"{"message":{"fid":"cAbCdEf0123","data":{"k":"v"}}}"#)
        #expect(sent.status == 0 && sent.output.contains(#""enqueued":1"#), "\(sent)")
    }

    /// The daemon's port is the binary listener's even when the HTTP front's line is logged first
    /// (a CLI given the HTTP port read "HTTP/1.1" as protocol version 72 in a loaded run).
    @Test func theListenerPortIsNotTheHTTPFronts() {
        let log = """
            2026-11-29T09:20:42+0000 info fanoutd: address=127.0.0.1:39581 tls=off [fanoutd] HTTP front listening
            2026-11-29T09:20:42+0000 info fanoutd: address=127.0.0.1:37239 data-dir=/tmp/d durability=always tls=off [fanoutd] listening
            """
        #expect(Daemon.listenerPort(in: log) == 37239)
        #expect(Daemon.listenerPort(in: String(log.split(separator: "\n")[0])) == nil)
    }

    /// fanoutd --http: an HTTP client that is not ours (Python's urllib) sends through FCM's v1
    /// path with an API key, and reads health; plain HTTP off loopback is refused.
    @Test func theHTTPFrontServesFCMsSendPath() throws {
        let directory = TemporaryDirectory.path("fanoutd-http")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let daemon = try Daemon(directory: directory, arguments: ["--http", "127.0.0.1:0"])
        defer { _ = daemon.stop() }
        let httpPort = try #require(daemon.httpPort())
        let admin = try Self.adminKey(in: directory)
        #expect(try self.fanout(daemon.port, admin, "register", "--platform", "web", "--app-id", "1:1:web:a", "--token", "http-cli-1").status == 0)
        let script = """
            import json, sys, urllib.request, urllib.error
            base = "http://127.0.0.1:%s" % sys.argv[1]
            print(urllib.request.urlopen(base + "/healthz").status)
            body = json.dumps({"message": {"token": "http-cli-1", "data": {"k": "v"}}}).encode()
            request = urllib.request.Request(base + "/v1/projects/default/messages:send", data=body, method="POST",
                headers={"Authorization": "Bearer " + sys.argv[2], "Content-Type": "application/json"})
            print(json.load(urllib.request.urlopen(request))["name"])
            request = urllib.request.Request(base + "/v1/projects/default/messages:send", data=body, method="POST")
            try:
                urllib.request.urlopen(request)
            except urllib.error.HTTPError as error:
                print(error.code, json.load(error)["error"]["status"])
            """
        let client = try FanoutCLITests.run("python3", ["-c", script, "\(httpPort)", admin])
        let printed = client.output
        let lines = printed.split(separator: "\n").map(String.init)
        #expect(lines.count == 3, "\(printed) \(client.error.suffix(2000))")
        #expect(lines.first == "200")
        #expect(lines.dropFirst().first?.hasPrefix("projects/default/messages/") == true)
        #expect(lines.last == "401 UNAUTHENTICATED")
        let refused = try Self.fanoutd(["--data-dir", directory + "/other", "--http", "0.0.0.0:0"])
        #expect(refused.status != 0 && refused.error.contains("--insecure-plaintext"), "\(refused)")
    }

    @Test func usersAreListedAndAnonymousCleanUpCanBeTriedAndTurnedOn() throws {
        let directory = TemporaryDirectory.path("fanoutd-users")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let daemon = try Daemon(directory: directory)
        defer { _ = daemon.stop() }
        let key = try Self.adminKey(in: directory)
        #expect(try self.fanout(daemon.port, key, "register", "--platform", "web", "--app-id", "1:1:web:a", "--token", "w1").status == 0)
        #expect(try self.fanout(daemon.port, key, "user", "bind", "w1", "guest-1", "--anonymous").status == 0)
        let listed = try self.fanout(daemon.port, key, "user", "list", "--json")
        #expect(listed.status == 0, "\(listed.error)")
        let user = try #require(try JSONSerialization.jsonObject(with: Data(listed.output.utf8)) as? [String: Any])
        #expect(user["user"] as? String == "guest-1" && user["anonymous"] as? Bool == true && user["devices"] as? Int == 1)
        #expect((user["createdAt"] as? String)?.hasSuffix("Z") == true)
        #expect(try self.fanout(daemon.port, key, "user", "list").output.hasPrefix("guest-1 (anonymous) devices=1 created=20"))
        #expect(try self.fanout(daemon.port, key, "user", "cleanup", "--dry-run").output == "", "created just now: not due")
        let on = try self.fanout(daemon.port, key, "user", "auto-cleanup", "on")
        #expect(on.output.hasPrefix("automatic anonymous clean-up on since 20"), "\(on.output) \(on.error)")
        #expect(try self.fanout(daemon.port, key, "user", "auto-cleanup", "off", "--json").output == #"{"enabledSince":null}"# + "\n")
        #expect(try self.fanout(daemon.port, key, "user", "auto-cleanup", "maybe").status == 2)
    }
}
