import FanoutCore
import FanoutTestSupport
import Foundation
import Testing

/// A push backend's worker through fanoutd and the CLI: what `fanout tail` prints of a delivery,
/// what `fanout send` says of refused and skipped recipients, and that tail loses nothing when its
/// reader dies or it is stopped.
@Suite("Delivery workers through fanoutd and the CLI")
struct WorkerCLITests {
    static let apnsToken = String(repeating: "0a1b", count: 16)

    /// A running fanoutd with its admin key; stopped by `stop()`.
    struct Server {
        let daemon: FanoutdTests.Daemon
        let directory: String
        let key: String

        init() throws {
            self.directory = TemporaryDirectory.path("fanout-worker")
            self.daemon = try FanoutdTests.Daemon(directory: self.directory)
            self.key = try FanoutdTests.adminKey(in: self.directory)
        }

        var connection: [String] { ["--server", "127.0.0.1:\(self.daemon.port)", "--api-key", self.key] }

        func fanout(_ arguments: String..., input: String = "") throws -> FanoutCLITests.Outcome {
            try FanoutCLITests.fanout(arguments + self.connection, input: input)
        }

        /// `fanout ARGUMENTS` running, its standard output a pipe the test reads.
        func start(_ arguments: String...) throws -> Process {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("fanout")
            process.arguments = arguments + self.connection
            process.standardOutput = Pipe.closedOnExec()
            process.standardError = FileHandle.nullDevice
            try process.run()
            return process
        }

        func stop() {
            _ = self.daemon.stop()
            try? FileManager.default.removeItem(atPath: self.directory)
        }
    }

    static func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    /// Reads one line byte by byte, so that nothing after it leaves the pipe; fails if nothing
    /// comes for 60 s.
    static func readLine(_ handle: FileHandle) throws -> String {
        var bytes: [UInt8] = []
        while true {
            var ready = pollfd(fd: handle.fileDescriptor, events: Int16(POLLIN), revents: 0)
            try #require(poll(&ready, 1, 60_000) == 1, "nothing to read for 60 s after \(bytes.count) bytes")
            let byte = try #require(try handle.read(upToCount: 1)?.first, "the pipe ended after \(bytes.count) bytes")
            if byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(byte)
        }
    }

    @Test func anIOSBackgroundPushReachesTheWorkerWithItsAPNsTokenAndHeaders() throws {
        let server = try Server()
        defer { server.stop() }
        let registered = try server.fanout(
            "register", "--platform", "ios", "--app-id", "1:1:ios:a", "--token", "ios-token-1", "--apns-token", Self.apnsToken,
            "--device-os", "iOS 18", "--device-type", "phone", "--json"
        )
        #expect(registered.status == 0, "\(registered.error)")
        let installation = try Self.json(registered.output)
        #expect(installation["apnsToken"] as? String == Self.apnsToken)
        #expect(installation["deviceOs"] as? String == "iOS 18" && installation["deviceType"] as? String == "phone")
        let line = try server.fanout("installation", "ios-token-1").output
        #expect(line.contains("apns-token=<32 bytes>") && line.contains("device-os=iOS 18") && line.contains("created=20"), "\(line)")
        #expect(!line.contains(Self.apnsToken) && !line.contains("ios-token-1"), "no tokens in human output")

        let sent = try server.fanout("send", "--json", input: #"{"message":{"token":"ios-token-1","data":{"job":"sync"}}}"#)
        #expect(sent.status == 0, "\(sent.error)")
        let tail = try server.fanout("tail", "--platform", "ios", "--count", "1", "--json")
        #expect(tail.status == 0, "\(tail.error)")
        let delivery = try Self.json(tail.output)
        #expect(delivery["token"] as? String == "ios-token-1")
        #expect(delivery["apnsToken"] as? String == Self.apnsToken)
        let headers = try #require(delivery["headers"] as? [String: String])
        #expect(headers["apns-priority"] == "5")
        #expect(headers["apns-push-type"] == "background")
        #expect(headers["apns-expiration"].flatMap(Int.init) ?? 0 > Int(Date().timeIntervalSince1970) + 29 * 86_400)
        #expect(delivery["payload"] as? String == #"{"aps":{"content-available":1},"job":"sync"}"#)
    }

    @Test func anAPNsTokenMovesWhenAnotherInstallationTakesIt() throws {
        let server = try Server()
        defer { server.stop() }
        let phone = try server.fanout("register", "--platform", "ios", "--app-id", "1:1:ios:a", "--token", "phone", "--apns-token", Self.apnsToken, "--json")
        let phoneFID = try #require(try Self.json(phone.output)["fid"] as? String)
        #expect(try server.fanout("register", "--platform", "ios", "--app-id", "1:1:ios:a", "--token", "tablet").status == 0)
        #expect(try Self.json(try server.fanout("apns", "lookup", Self.apnsToken, "--json").output)["fid"] as? String == phoneFID)

        let taken = try server.fanout("apns", "set", "tablet", Self.apnsToken.uppercased(), "--json")
        #expect(taken.status == 0, "\(taken.error)")
        #expect(try Self.json(taken.output)["apnsToken"] as? String == Self.apnsToken, "stored lowercase")
        #expect(try Self.json(try server.fanout("apns", "lookup", Self.apnsToken, "--json").output)["token"] as? String == "tablet")
        #expect(try Self.json(try server.fanout("installation", "phone", "--json").output)["apnsToken"] == nil)

        #expect(try server.fanout("apns", "clear", "tablet").status == 0)
        let gone = try server.fanout("apns", "lookup", Self.apnsToken)
        #expect(gone.status == 1 && gone.error.contains("NOT_FOUND"), "\(gone.error)")
        let bad = try server.fanout("apns", "set", "tablet", "not-hex")
        #expect(bad.status == 1 && bad.error.contains("apnsToken"), "\(bad.error)")
    }

    @Test func anOversizedAPNsBodyIsRefusedForIOSWithTheReasonWhileAndroidGetsItsDelivery() throws {
        let server = try Server()
        defer { server.stop() }
        #expect(try server.fanout("register", "--platform", "android", "--app-id", "1:1:android:a", "--token", "android-1").status == 0)
        #expect(try server.fanout("register", "--platform", "ios", "--app-id", "1:1:ios:a", "--token", "ios-1").status == 0)
        // The data fits FCM's 4096 bytes; apns.payload makes the APNs body 4097 bytes.
        let data = String(repeating: "d", count: 3000)
        let fixed = #"{"aps":{"content-available":1},"pad":"","big":"\#(data)"}"#.utf8.count
        let padding = String(repeating: "p", count: 4097 - fixed)
        let body = #"{"message":{"tokens":["android-1","ios-1"],"data":{"big":"\#(data)"},"apns":{"payload":{"pad":"\#(padding)"},"headers":{"apns-priority":"5"}}}}"#
        let sent = try server.fanout("send", "--json", input: body)
        #expect(sent.status == 0, "\(sent.error)")
        let report = try Self.json(sent.output)
        let recipients = try #require(report["recipients"] as? [[String: Any]])
        #expect(recipients.first?["status"] as? String == "ok")
        #expect(recipients.last?["status"] as? String == "INVALID_ARGUMENT")
        #expect(recipients.last?["field"] as? String == "message.tokens[1]")
        #expect(recipients.last?["description"] as? String == "Message too big: the rendered ios payload is 4097 bytes, over its limit of 4096 bytes")
        let ios = try #require((report["platforms"] as? [[String: Any]])?[1])
        #expect(ios["renderedBytes"] as? Int == 4097 && ios["refused"] as? Int == 1)
        #expect(try server.fanout("pending", "android-1").output.hasSuffix("# 1 pending\n"))
        #expect(try server.fanout("pending", "ios-1").output == "# 0 pending\n")
        let human = try server.fanout("send", input: body)
        #expect(human.output.contains("ios: audience=1 enqueued=0 refused=1 (Message too big: the rendered ios payload is 4097 bytes"), "\(human.output)")
        #expect(human.output.contains("recipient #2: INVALID_ARGUMENT: message.tokens[1]: Message too big"))
    }

    @Test func aSignedOutDeviceGetsNothing() throws {
        let server = try Server()
        defer { server.stop() }
        #expect(try server.fanout("register", "--platform", "android", "--app-id", "1:1:android:a", "--token", "phone-1").status == 0)
        #expect(try server.fanout("user", "bind", "phone-1", "alice").status == 0)
        #expect(try server.fanout("subscribe", "news", "phone-1").status == 0)
        let signedOut = try server.fanout("user", "signout", "alice", "phone-1", "--json")
        #expect(signedOut.status == 0, "\(signedOut.error)")
        let fid = try #require(try Self.json(signedOut.output)["fid"] as? String)

        let sent = try Self.json(try server.fanout("send", "--json", input: #"{"message":{"topic":"news","data":{"k":"v"}}}"#).output)
        let android = try #require((sent["platforms"] as? [[String: Any]])?.first)
        #expect(sent["audience"] as? Int == 1 && sent["enqueued"] as? Int == 0)
        #expect(android["skippedWithoutToken"] as? Int == 1)
        #expect(try server.fanout("pending", fid).output == "# 0 pending\n")
        let byFID = try Self.json(try server.fanout("send", "--json", input: #"{"message":{"fid":"\#(fid)","data":{"k":"v"}}}"#).output)
        #expect((byFID["recipients"] as? [[String: Any]])?.first?["status"] as? String == "FAILED_PRECONDITION")
    }

    @Test func tailPipedIntoAReaderThatDiesLosesNothing() throws {
        let server = try Server()
        defer { server.stop() }
        #expect(try server.fanout("register", "--platform", "android", "--app-id", "1:1:android:a", "--token", "phone-1").status == 0)
        for index in 1...5 {
            #expect(try server.fanout("send", input: #"{"message":{"token":"phone-1","data":{"n":"\#(index)"}}}"#).status == 0)
        }
        let tail = try server.start("tail", "--platform", "android", "--credit", "1", "--json")
        let output = try #require(tail.standardOutput as? Pipe)
        let first = try Self.json(try Self.readLine(output.fileHandleForReading))
        let second = try Self.json(try Self.readLine(output.fileHandleForReading))
        #expect([first["message"], second["message"]] as? [String] == ["projects/default/messages/1", "projects/default/messages/2"])
        // Tail writes message 3 into the pipe; unread there, it stays unacknowledged.
        let descriptor = output.fileHandleForReading.fileDescriptor
        var unread: Int32 = 0
        let deadline = ContinuousClock.now + .seconds(60)
        while ioctl(descriptor, UInt(FIONREAD), &unread) == 0 && unread == 0 && ContinuousClock.now < deadline {
            var ready = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            _ = poll(&ready, 1, 10_000)
        }
        #expect(unread > 0)
        #expect(try server.fanout("pending", "phone-1").output.contains(" projects/default/messages/3 "), "held, not acknowledged")
        // The reader dies: what tail wrote after it is not acknowledged. (One more message: a
        // tail that had acknowledged everything it wrote would only notice at its next write.)
        try output.fileHandleForReading.close()
        #expect(try server.fanout("send", input: #"{"message":{"token":"phone-1","data":{"n":"6"}}}"#).status == 0)
        try #require(tail.waitForExit(within: .seconds(60)), "tail exits")
        #expect(tail.exit() == .exited(2))
        let pending = try server.fanout("pending", "phone-1").output
        let waiting = Set(pending.split(separator: "\n").filter { !$0.hasPrefix("#") }.compactMap { $0.split(separator: " ").dropFirst().first })
        // Nothing tail had not written to a reader that read it is lost; message 1 was read and
        // tail went on (acknowledged); message 2 may come again (read, but the reader died before
        // tail saw it so): at least once.
        #expect(waiting.isSuperset(of: ["projects/default/messages/3", "projects/default/messages/4", "projects/default/messages/5"]), "\(pending)")
        #expect(!waiting.contains("projects/default/messages/1"), "\(pending)")
    }

    @Test func tailStopsOnSIGTERMAndAcknowledgesWhatItPrinted() throws {
        let server = try Server()
        defer { server.stop() }
        #expect(try server.fanout("register", "--platform", "web", "--app-id", "1:1:web:a", "--token", "browser-1").status == 0)
        for index in 1...3 {
            #expect(try server.fanout("send", input: #"{"message":{"token":"browser-1","data":{"n":"\#(index)"}}}"#).status == 0)
        }
        let tail = try server.start("tail", "--platform", "web")
        let output = try #require(tail.standardOutput as? Pipe)
        for _ in 1...3 { _ = try Self.readLine(output.fileHandleForReading) }
        // All three read. SIGTERM, whether tail is still acknowledging them or already waits for
        // more: it finishes the batch it printed, acknowledges it, and exits 0.
        tail.terminate()
        try #require(tail.waitForExit(within: .seconds(60)), "tail exits")
        #expect(tail.exit() == .exited(0))
        #expect(try server.fanout("pending", "browser-1").output == "# 0 pending\n")
        #expect(try server.fanout("send", input: #"{"message":{"token":"browser-1","data":{"n":"4"}}}"#).status == 0)
        #expect(try server.fanout("pending", "browser-1").output.hasSuffix("# 1 pending\n"), "the next message waits for the next consumer")
    }
}
