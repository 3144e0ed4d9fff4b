import FanoutCore
import FanoutHTTP
import FanoutTestSupport
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

/// Sends are served on the event loop by the front's channel handler and every other request by
/// Hummingbird's router; over one HTTP/1.1 connection the answers still come in the order the
/// requests came, whichever serves them, with pipelined requests written in one go.
@Suite("HTTP front: pipelining")
struct HTTPPipeliningTests {
    struct Answer {
        let status: Int
        let headers: [String: String]
        let body: String
    }

    /// Writes `bytes`, reads until the server closes (or `timeout` seconds pass), and splits what
    /// came back into answers; `closed` says whether the server closed.
    ///
    /// Every exchange here ends with the server closing the connection, so the timeout is only
    /// how long a failing test waits: 60 seconds, since in a loaded `make test` (a clean clone,
    /// every suite at once on 2 cores) a pipelined answer once took more than 10.
    static func exchange(_ port: Int, _ bytes: [UInt8], timeout: Int = 60) async throws -> (answers: [Answer], closed: Bool) {
        let (received, closed) = try await RawHTTPSocket.exchange(port, bytes, timeout: timeout)
        return (try Self.answers(in: received), closed)
    }

    /// The HTTP/1.1 answers in `bytes`, each framed by its Content-Length.
    static func answers(in bytes: [UInt8]) throws -> [Answer] {
        var answers: [Answer] = []
        var rest = bytes[...]
        let separator = Array("\r\n\r\n".utf8)
        while !rest.isEmpty {
            let end = try #require(rest.indices.first { rest[$0...].starts(with: separator) }, "a head's end")
            let lines = String(decoding: rest[..<end], as: UTF8.self).components(separatedBy: "\r\n")
            let status = try #require(Int(lines[0].split(separator: " ")[1]))
            var headers: [String: String] = [:]
            for line in lines.dropFirst() {
                let (name, value) = try #require(line.firstIndex(of: ":").map { (line[..<$0], line[line.index(after: $0)...]) })
                headers[name.lowercased()] = value.trimmingCharacters(in: .whitespaces)
            }
            let length = try #require(headers["content-length"].flatMap { Int($0) }, "\(lines[0]) has a Content-Length")
            let bodyStart = end + separator.count
            try #require(rest.endIndex - bodyStart >= length)
            answers.append(Answer(status: status, headers: headers, body: String(decoding: rest[bodyStart..<(bodyStart + length)], as: UTF8.self)))
            rest = rest[(bodyStart + length)...]
        }
        return answers
    }

    static func request(_ method: String, _ path: String, body: String? = nil, close: Bool = false) -> String {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: fanout\r\nAuthorization: Bearer \(LoopbackServer.adminKey)\r\n"
        if close { head += "Connection: close\r\n" }
        if let body { head += "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n" }
        return head + "\r\n" + (body ?? "")
    }

    static func withFront(_ body: @Sendable (Int, Engine) async throws -> Void) async throws {
        try await TemporaryDirectory.with { directory in
            let engine = try Engine(directory: directory)
            defer { try? engine.close() }
            _ = try await engine.register(RegistrationRequest(token: RegistrationToken("pipelined-token")!, platform: .android, appID: AppID("1:1:android:a")!))
            let front = HTTPFront(engine: engine, keys: { LoopbackServer.keys }, tokens: nil)
            let application = Application(router: front.router(), server: front.http1(), configuration: .init(address: .hostname("127.0.0.1", port: 0)))
            try await application.test(.live) { client in try await body(try #require(client.port), engine) }
        }
    }

    @Test func answersComeInTheOrderOfTheRequests() async throws {
        try await Self.withFront { port, engine in
            let send = "/v1/projects/default/messages:send"
            let requests = [
                Self.request("POST", send, body: #"{"message":{"token":"pipelined-token","data":{"n":"1"}}}"#),
                Self.request("GET", "/healthz"),
                Self.request("POST", send, body: #"{"message":{"token":"unknown-token","data":{"n":"2"}}}"#),
                Self.request("GET", "/no/such/route"),
                Self.request("POST", send + "?alt=json", body: #"{"validate_only":true,"message":{"topic":"news"}}"#),
                Self.request("POST", "/v1/projects/default/messages:send/extra", body: "{}"),
                Self.request("POST", send, body: #"{"message":{"token":"pipelined-token","data":{"n":"3"}}}"#),
                Self.request("GET", "/healthz", close: true),
            ]
            let (answers, closed) = try await Self.exchange(port, Array(requests.joined().utf8))
            #expect(closed, "Connection: close on the last request")
            try #require(answers.count == 8, "\(answers)")
            #expect(answers.map(\.status) == [200, 200, 404, 404, 200, 404, 200, 200])
            #expect(answers[0].body.hasPrefix(#"{"name":"projects/default/messages/"#))
            #expect(answers[1].body == #"{"status":"ok"}"#)
            #expect(answers[2].body.contains(#""errorCode":"UNREGISTERED""#))
            #expect(answers[3].body.contains(#""status":"NOT_FOUND""#) && !answers[3].body.contains("UNREGISTERED"))
            #expect(answers[4].body == #"{"name":"projects/default/messages/fake_message_id"}"#)
            #expect(answers[6].body.hasPrefix(#"{"name":"projects/default/messages/"#) && answers[6].body != answers[0].body)
            // The handler's answers carry what the router's do.
            #expect(answers[0].headers["content-type"] == "application/json; charset=UTF-8")
            #expect(answers[0].headers["date"]?.hasSuffix(" GMT") == true, "\(answers[0].headers)")
            let pending = try engine.pendingDeliveries(for: .token(RegistrationToken("pipelined-token")!))
            #expect(pending.count == 2)
        }
    }

    @Test func aSendWithConnectionCloseIsAnsweredThenTheConnectionCloses() async throws {
        try await Self.withFront { port, _ in
            let requests = [
                Self.request("POST", "/v1/projects/default/messages:send", body: #"{"message":{"token":"pipelined-token","data":{"k":"v"}}}"#, close: true),
                // Never read: the connection closes after the send's answer.
                Self.request("GET", "/healthz"),
            ]
            let (answers, closed) = try await Self.exchange(port, Array(requests.joined().utf8))
            #expect(closed)
            try #require(answers.count == 1, "\(answers)")
            #expect(answers[0].status == 200 && answers[0].headers["connection"] == "close")
        }
    }

    @Test func anHTTP10SendWithoutKeepAliveIsAnsweredThenTheConnectionCloses() async throws {
        try await Self.withFront { port, _ in
            let body = #"{"message":{"token":"pipelined-token","data":{"k":"v"}}}"#
            let request = Self.request("POST", "/v1/projects/default/messages:send", body: body)
                .replacingOccurrences(of: "HTTP/1.1\r\n", with: "HTTP/1.0\r\n")
            let (answers, closed) = try await Self.exchange(port, Array(request.utf8))
            #expect(closed)
            try #require(answers.count == 1, "\(answers)")
            #expect(answers[0].status == 200 && answers[0].body.hasPrefix(#"{"name":"projects/default/messages/"#))
        }
    }

    @Test func aBodyTooLargeIsRefusedAndTheNextRequestIsServed() async throws {
        try await Self.withFront { port, _ in
            let huge = String(repeating: "x", count: HTTPFront.maximumBodySize + 10)
            let requests = [
                Self.request("POST", "/v1/projects/default/messages:send", body: huge),
                Self.request("POST", "/v1/projects/default/messages:send", body: #"{"validate_only":true,"message":{"topic":"news"}}"#),
                Self.request("GET", "/healthz", close: true),
            ]
            let (answers, closed) = try await Self.exchange(port, Array(requests.joined().utf8))
            #expect(closed)
            try #require(answers.count == 3, "\(answers)")
            #expect(answers[0].status == 400 && answers[0].body.contains(#""field":"body""#))
            #expect(answers[1].status == 200 && answers[1].body.contains("fake_message_id"))
            #expect(answers[2].status == 200)
        }
    }
}
