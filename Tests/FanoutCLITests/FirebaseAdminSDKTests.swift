import FanoutClient
import FanoutCluster
import FanoutTestSupport
import FanoutWire
import Foundation
import Testing

/// The real firebase-admin Python SDK (from PyPI, in the virtual environment `make test` makes)
/// against fanoutd's HTTP front: `scripts/firebase-admin-flow.py` sends and manages topics as a
/// backend would and asserts what the SDK answers; here the deliveries it queued reach consumers.
extension FanoutdTests {
    static var repositoryRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    /// The virtual environment's python3, where `make test` installs firebase-admin (`make
    /// python-deps`); nil, with an issue recorded, when it is missing.
    static func sdkPython() -> URL? {
        let python = Self.repositoryRoot.appendingPathComponent(".build/python-venv/bin/python3")
        guard FileManager.default.isExecutableFile(atPath: python.path) else {
            Issue.record("no \(python.path): `make test` installs firebase-admin into it (or run `make python-deps`)")
            return nil
        }
        return python
    }

    @Test func theFirebaseAdminSDKSendsAndManagesTopics() throws {
        guard let python = Self.sdkPython() else { return }
        let directory = TemporaryDirectory.path("fanoutd-sdk")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let daemon = try Daemon(directory: directory, arguments: ["--http", "127.0.0.1:0"])
        defer { _ = daemon.stop() }
        let httpPort = try #require(daemon.httpPort())
        let key = try Self.adminKey(in: directory)
        let android = try self.fanout(daemon.port, key, "register", "--platform", "android", "--app-id", "1:1:android:a", "--token", "sdk-android-1", "--json")
        #expect(android.status == 0, "\(android.output)\(android.error)")
        let fid = try #require(try JSONSerialization.jsonObject(with: Data(android.output.utf8)) as? [String: Any])["fid"] as? String
        for outcome in [
            try self.fanout(daemon.port, key, "register", "--platform", "ios", "--app-id", "1:1:ios:a", "--token", "sdk-ios-1"),
            try self.fanout(daemon.port, key, "register", "--platform", "android", "--app-id", "1:1:android:a", "--token", "sdk-old"),
            try self.fanout(daemon.port, key, "refresh", "sdk-old", "sdk-new"),
        ] {
            #expect(outcome.status == 0, "\(outcome.output)\(outcome.error)")
        }

        let flow = try FanoutCLITests.run(python.path, [
            Self.repositoryRoot.appendingPathComponent("scripts/firebase-admin-flow.py").path, "http://127.0.0.1:\(httpPort)", key, try #require(fid),
        ])
        #expect(flow.status == 0, "\(flow.output)\(flow.error)")
        #expect(flow.output.contains("all steps answered as FCM answers them"), "\(flow.output)\(flow.error)")

        // What the SDK sent reached consumers, with the right payloads: Android got the token, FID,
        // topic, condition, send_each and post-unsubscribe sends (not the dry run, not the refused
        // ones); iOS the topic (an alert) and the condition (background), then it had left.
        func steps(_ platform: String, _ count: Int) throws -> [String: [String: Any]] {
            let tail = try self.fanout(daemon.port, key, "tail", "--platform", platform, "--count", "\(count)", "--json")
            #expect(tail.status == 0, "\(tail.error)")
            var byStep: [String: [String: Any]] = [:]
            for line in tail.output.split(separator: "\n") {
                let delivery = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
                let text = try #require(delivery["payload"] as? String)
                let payload = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
                let step = try #require((payload["data"] as? [String: Any])?["step"] as? String ?? payload["step"] as? String)
                byStep[step] = payload
            }
            return byStep
        }
        let androidSteps = try steps("android", 6)
        #expect(Set(androidSteps.keys) == ["token", "fid", "topic", "condition", "each", "after-unsubscribe"])
        #expect((androidSteps["topic"]?["notification"] as? [String: Any])?["title"] as? String == "Hello")
        let iosSteps = try steps("ios", 2)
        #expect(Set(iosSteps.keys) == ["topic", "condition"])
        #expect(((iosSteps["topic"]?["aps"] as? [String: Any])?["alert"] as? [String: Any])?["title"] as? String == "Hello")
        #expect(try self.fanout(daemon.port, key, "pending", "sdk-android-1").output == "# 0 pending\n", "nothing else was queued")
        #expect(try self.fanout(daemon.port, key, "pending", "sdk-ios-1").output == "# 0 pending\n")

        // /metrics, read by prometheus_client's own text-format parser, counted what happened.
        let metrics = try Self.prometheusSamples(python: python, url: "http://127.0.0.1:\(httpPort)/metrics")
        func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
            metrics[name]?.first { $0.labels == labels }?.value
        }
        let send = "POST /v1/projects/{project}/messages:send"
        // 200s: token, dry run, FID, topic, condition, send_each's good one, after-unsubscribe.
        #expect(value("fanout_requests_total", ["listener": "http", "operation": send, "status": "OK"]) == 7)
        #expect(value("fanout_requests_total", ["listener": "http", "operation": send, "status": "NOT_FOUND"]) == 2, "the rotated token twice")
        #expect(value("fanout_requests_total", ["listener": "http", "operation": send, "status": "INVALID_ARGUMENT"]) == 2)
        // A 401 makes google-auth's session refresh its credential and retry, twice: 3 requests.
        #expect(value("fanout_requests_total", ["listener": "http", "operation": send, "status": "UNAUTHENTICATED"]) == 3)
        #expect(value("fanout_request_duration_seconds_count", ["listener": "http", "operation": send]) == 14)
        #expect(value("fanout_deliveries_queued_total") == 8, "6 Android and 2 iOS deliveries")
        #expect(value("fanout_deliveries_handed_out_total") == 8)
        #expect(value("fanout_deliveries_acknowledged_total") == 8)
        #expect(value("fanout_deliveries_pending", ["project": "default"]) == 0)
        #expect(value("fanout_requests_total", ["listener": "tcp", "operation": "REGISTER", "status": "OK"]) == 3)
        #expect(value("fanout_requests_total", ["listener": "tcp", "operation": "ACK", "status": "OK"]) ?? 0 >= 2)
        #expect(value("fanout_log_records_total") ?? 0 > 0 && value("fanout_log_syncs_total") ?? 0 > 0)
        #expect(value("fanout_log_failures_total") == 0)
        #expect(value("fanout_sends_total") == value("fanout_send_audience_size_count"), "one audience per send")

        // Every metric docs/operations.md lists and the Grafana dashboard charts is served.
        let served = Set(metrics.keys.map { $0.replacingOccurrences(of: "_bucket", with: "").replacingOccurrences(of: "_count", with: "").replacingOccurrences(of: "_sum", with: "") })
        for document in ["docs/operations.md", "docs/grafana-dashboard.json"] {
            let text = try String(contentsOf: Self.repositoryRoot.appendingPathComponent(document), encoding: .utf8)
            let named = Set(text.matches(of: /fanout_[a-z_]+/).map { String($0.output) }
                .map { $0.replacingOccurrences(of: "_bucket", with: "").replacingOccurrences(of: "_count", with: "").replacingOccurrences(of: "_sum", with: "") })
            #expect(named.count >= 10, "\(document) names the metrics")
            #expect(named.subtracting(served).isEmpty, "\(document) names metrics /metrics does not serve: \(named.subtracting(served).sorted())")
        }
    }

    /// The same SDK flow through the HTTP front of one node of a two-node cluster (one NATS
    /// server, 4 shards): each call is routed to the owners of the shards it touches, on either
    /// node, and answered as one fanoutd answers it; the deliveries it queued are pending on their
    /// installations' shards with the right payloads; Firebase Installations' calls work through
    /// either node; and each node's /metrics counts its HTTP requests and its owned shards' deliveries.
    @Test func theFirebaseAdminSDKSendsThroughAClusterNode() async throws {
        guard let python = Self.sdkPython() else { return }
        guard let executable = NATSServerProcess.installedExecutable else {
            Issue.record("no nats-server: `make test` installs it (apt: nats-server)")
            return
        }
        let directory = TemporaryDirectory.path("fanoutd-sdk-cluster")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let nats = try NATSServerProcess(executable: executable, directory: "\(directory)/nats")
        try await nats.start()
        defer { nats.kill() }
        let created = try FanoutCLITests.fanout(["key", "create", "--file", "\(directory)/api-keys", "--name", "admin", "--role", "admin"])
        let key = created.output.trimmingCharacters(in: .whitespacesAndNewlines)
        var daemons: [Daemon] = []
        defer { for daemon in daemons where !daemon.child.hasExited { _ = daemon.stop() } }
        // Started (and their logs read, blocking) off the concurrency pool, which other tests share.
        for index in 1...2 {
            daemons.append(try await onOwnThread {
                try Daemon(directory: "\(directory)/node-\(index)", arguments: [
                    "--cluster", nats.url, "--node", "node-\(index)", "--shards", "4", "--api-keys", "\(directory)/api-keys", "--http", "127.0.0.1:0",
                ])
            })
        }
        let (first, second) = (daemons[0], daemons[1])
        let (firstHTTPPort, secondHTTPPort) = try await onOwnThread { (first.httpPort(), second.httpPort()) }
        let httpPort = try #require(firstHTTPPort)
        // Every shard owned, each node owning some.
        let settled = ContinuousClock.now + .seconds(60)
        var status = try ClusterStatus.read(urls: nats.url)
        while ContinuousClock.now < settled, status.shards.contains(where: { $0.owner == nil }) || Set(status.shards.compactMap(\.owner)).count < 2 {
            try await Task.sleep(for: .milliseconds(200))
            status = try ClusterStatus.read(urls: nats.url)
        }
        try #require(Set(status.shards.compactMap(\.owner)) == ["node-1", "node-2"] && status.shards.count == 4, "\(status.table)")

        let port = daemons[1].port
        let android = try self.fanout(port, key, "register", "--platform", "android", "--app-id", "1:1:android:a", "--token", "sdk-android-1", "--json")
        let fid = try #require(try JSONSerialization.jsonObject(with: Data(android.output.utf8)) as? [String: Any])["fid"] as? String
        #expect(try self.fanout(port, key, "register", "--platform", "ios", "--app-id", "1:1:ios:a", "--token", "sdk-ios-1").status == 0)
        #expect(try self.fanout(port, key, "register", "--platform", "android", "--app-id", "1:1:android:a", "--token", "sdk-old").status == 0)
        #expect(try self.fanout(port, key, "refresh", "sdk-old", "sdk-new").status == 0)
        let flowArguments = [
            Self.repositoryRoot.appendingPathComponent("scripts/firebase-admin-flow.py").path, "http://127.0.0.1:\(httpPort)", key, try #require(fid),
        ]
        let flow = try await onOwnThread { try FanoutCLITests.run(python.path, flowArguments) }
        #expect(flow.status == 0, "\(flow.output)\(flow.error)")
        #expect(flow.output.contains("all steps answered as FCM answers them"), "\(flow.output)\(flow.error)")

        // What the SDK sent waits on each installation's shard, read through the other node.
        let client = try await FanoutClient.connect(host: "127.0.0.1", port: port, apiKey: key)
        func steps(_ token: String) async throws -> [String: [String: Any]] {
            var byStep: [String: [String: Any]] = [:]
            for delivery in try await client.pendingDeliveries(for: token) {
                let payload = try #require(try JSONSerialization.jsonObject(with: Data(delivery.payload)) as? [String: Any])
                let step = try #require((payload["data"] as? [String: Any])?["step"] as? String ?? payload["step"] as? String)
                byStep[step] = payload
            }
            return byStep
        }
        let androidSteps = try await steps("sdk-android-1")
        #expect(Set(androidSteps.keys) == ["token", "fid", "topic", "condition", "each", "after-unsubscribe"])
        #expect((androidSteps["topic"]?["notification"] as? [String: Any])?["title"] as? String == "Hello")
        let iosSteps = try await steps("sdk-ios-1")
        #expect(Set(iosSteps.keys) == ["topic", "condition"])
        #expect(((iosSteps["topic"]?["aps"] as? [String: Any])?["alert"] as? [String: Any])?["title"] as? String == "Hello")
        #expect(try await client.pendingDeliveries(for: "sdk-new").isEmpty)
        try await client.close()

        // Firebase Installations' calls, spread over both nodes: created through node-1 (the owner
        // of its shard issues the credentials), a new auth token and the JWK Set (both nodes' keys)
        // through node-2, deleted through node-1; then its refresh token gets nothing.
        let otherHTTPPort = try #require(secondHTTPPort)
        let installations = try FanoutCLITests.run(python.path, ["-c", """
            import json, sys, urllib.request, urllib.error
            first, second, key = sys.argv[1], sys.argv[2], sys.argv[3]
            def call(method, url, headers, body=None):
                request = urllib.request.Request(url, method=method, headers=headers, data=body)
                try:
                    with urllib.request.urlopen(request) as response:
                        return response.status, json.loads(response.read())
                except urllib.error.HTTPError as error:
                    return error.code, json.loads(error.read())
            base = "/v1/projects/default/installations"
            status, created = call("POST", first + base, {"x-goog-api-key": key, "Content-Type": "application/json"},
                b'{"fid": "cAECAwQFBgcICQoLDA0ODx", "appId": "1:1:android:a", "authVersion": "FIS_v2", "sdkVersion": "a:1"}')
            print("create", status, created.get("fid"), "expiresIn" in created.get("authToken", {}))
            fis = {"Authorization": "FIS_v2 " + created["refreshToken"], "Content-Type": "application/json"}
            status, token = call("POST", second + base + "/cAECAwQFBgcICQoLDA0ODx/authTokens:generate", fis, b'{}')
            print("generate", status, len(token.get("token", "")) > 100)
            status, jwks = call("GET", second + "/.well-known/jwks.json", {})
            print("jwks", status, len(jwks["keys"]))
            status, _ = call("DELETE", first + base + "/cAECAwQFBgcICQoLDA0ODx", fis)
            print("delete", status)
            status, refused = call("POST", second + base + "/cAECAwQFBgcICQoLDA0ODx/authTokens:generate", fis, b'{}')
            print("after", status, refused["error"]["status"])
            """, "http://127.0.0.1:\(httpPort)", "http://127.0.0.1:\(otherHTTPPort)", key])
        #expect(installations.output.split(separator: "\n") == [
            "create 200 cAECAwQFBgcICQoLDA0ODx True", "generate 200 True", "jwks 200 2", "delete 200", "after 404 NOT_FOUND",
        ], "\(installations.output)\(installations.error)")

        let metrics = try Self.prometheusSamples(python: python, url: "http://127.0.0.1:\(httpPort)/metrics")
        func value(_ name: String, _ labels: [String: String]) -> Double? { metrics[name]?.first { $0.labels == labels }?.value }
        let send = "POST /v1/projects/{project}/messages:send"
        #expect(value("fanout_requests_total", ["listener": "http", "operation": send, "status": "OK"]) == 7)
        #expect(value("fanout_requests_total", ["listener": "http", "operation": send, "status": "NOT_FOUND"]) == 2, "the rotated token twice")
        // The engines' metrics, per shard on the node that owns it: over the two nodes, the 8
        // deliveries queued and pending once each.
        let both = [metrics, try Self.prometheusSamples(python: python, url: "http://127.0.0.1:\(try #require(secondHTTPPort))/metrics")]
        func total(_ name: String) -> Double { both.flatMap { $0[name] ?? [] }.reduce(0) { $0 + $1.value } }
        #expect(total("fanout_deliveries_queued_total") == 8, "6 Android and 2 iOS deliveries")
        #expect(total("fanout_deliveries_pending") == 8)
        let shards = Set(both.flatMap { $0["fanout_deliveries_queued_total"] ?? [] }.compactMap { $0.labels["shard"] })
        #expect(!shards.isEmpty && shards.isSubset(of: ["0", "1", "2", "3"]), "\(shards)")
    }

    /// The SDK against a device's send quota (`--device-messages-per-minute 20`):
    /// `scripts/firebase-admin-quota.py` gets `QuotaExceededError` from the async client (which
    /// does not retry a 429) and a send through from the blocking one, which waits the
    /// `Retry-After`; here, what was accepted, and only that, was queued.
    @Test func theFirebaseAdminSDKMeetsTheDeviceQuota() throws {
        guard let python = Self.sdkPython() else { return }
        let directory = TemporaryDirectory.path("fanoutd-sdk-quota")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let daemon = try Daemon(directory: directory, arguments: ["--http", "127.0.0.1:0", "--device-messages-per-minute", "20"])
        defer { _ = daemon.stop() }
        let httpPort = try #require(daemon.httpPort())
        let key = try Self.adminKey(in: directory)
        #expect(try self.fanout(daemon.port, key, "register", "--platform", "android", "--app-id", "1:1:android:a", "--token", "sdk-quota").status == 0)

        let flow = try FanoutCLITests.run(python.path, [
            Self.repositoryRoot.appendingPathComponent("scripts/firebase-admin-quota.py").path, "http://127.0.0.1:\(httpPort)", key,
        ])
        #expect(flow.status == 0, "\(flow.output)\(flow.error)")
        #expect(flow.output.contains("the quota answered as FCM answers"), "\(flow.output)\(flow.error)")
        let sent = try #require(flow.output.firstMatch(of: /sent (\d+)/).flatMap { Int($0.output.1) })
        #expect(try self.fanout(daemon.port, key, "pending", "sdk-quota").output.hasSuffix("# \(sent) pending\n"))

        let metrics = try Self.prometheusSamples(python: python, url: "http://127.0.0.1:\(httpPort)/metrics")
        let exhausted = metrics["fanout_requests_total"]?.first {
            $0.labels == ["listener": "http", "operation": "POST /v1/projects/{project}/messages:send", "status": "RESOURCE_EXHAUSTED"]
        }
        #expect(exhausted?.value ?? 0 >= 1, "the refused send was counted as RESOURCE_EXHAUSTED")
    }

    /// Every sample of a /metrics page as prometheus_client's parser reads it (it refuses a page
    /// that is not valid text format): by name, each with its labels and value.
    static func prometheusSamples(python: URL, url: String) throws -> [String: [(labels: [String: String], value: Double)]] {
        let script = """
            import json, sys, urllib.request
            from prometheus_client.parser import text_string_to_metric_families
            text = urllib.request.urlopen(sys.argv[1]).read().decode()
            samples = [{"name": s.name, "labels": s.labels, "value": s.value}
                       for family in text_string_to_metric_families(text) for s in family.samples]
            print(json.dumps(samples))
            """
        let parsed = try FanoutCLITests.run(python.path, ["-c", script, url])
        #expect(parsed.status == 0, "prometheus_client parsed /metrics: \(parsed.error)")
        let samples = try #require(try JSONSerialization.jsonObject(with: Data(parsed.output.utf8)) as? [[String: Any]])
        var byName: [String: [(labels: [String: String], value: Double)]] = [:]
        for sample in samples {
            let name = try #require(sample["name"] as? String)
            byName[name, default: []].append((sample["labels"] as? [String: String] ?? [:], try #require(sample["value"] as? Double)))
        }
        return byName
    }
}
