import FanoutCore
import FanoutHTTP
import FanoutTestSupport
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

/// Bad HTTP from a raw socket, as a careless or hostile client sends it: requests that are not
/// HTTP, headers and bodies too big, unknown paths and methods, wrong credentials. Each is refused
/// clearly (in Google's error shape wherever a route is reached), without reading an oversized body
/// whole, and the listener keeps serving.
@Suite("HTTP front: bad input")
struct HTTPBadInputTests {
    /// Writes `bytes`, then reads one whole answer (its head and the body Content-Length
    /// announces), or until the server closes or `timeout` seconds pass without a byte (generous:
    /// a loaded machine is slow, and a whole answer ends the wait); returns what came back.
    static func exchange(_ port: Int, _ bytes: [UInt8], timeout: Int = 30) async throws -> String {
        let (received, _) = try await RawHTTPSocket.exchange(port, bytes, timeout: timeout, until: Self.isOneWholeAnswer)
        return String(decoding: received, as: UTF8.self)
    }

    @Sendable static func isOneWholeAnswer(_ received: [UInt8]) -> Bool {
        guard let text = String(bytes: received, encoding: .utf8), let end = text.range(of: "\r\n\r\n"),
            let length = text[..<end.lowerBound].split(separator: "\r\n").first(where: { $0.lowercased().hasPrefix("content-length:") })
                .flatMap({ Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) })
        else { return false }
        return text.utf8.count - text[..<end.upperBound].utf8.count >= length
    }

    static func request(_ head: String, body: [UInt8] = []) -> [UInt8] {
        Array((head.replacingOccurrences(of: "\n", with: "\r\n") + "\r\n\r\n").utf8) + body
    }

    @Test func badRequestsAreRefusedAndTheListenerStaysUp() async throws {
        try await TemporaryDirectory.with { directory in
            let engine = try Engine(directory: directory)
            defer { try? engine.close() }
            let front = HTTPFront(engine: engine, keys: { LoopbackServer.keys }, tokens: nil)
            let application = Application(router: front.router(), server: front.http1(), configuration: .init(address: .hostname("127.0.0.1", port: 0)))
            try await application.test(.live) { client in
                let port = try #require(client.port)
                let send = "POST /v1/projects/default/messages:send HTTP/1.1\nHost: fanout"
                let admin = "Authorization: Bearer \(LoopbackServer.adminKey)"

                // Not HTTP, and a header over the codec's limit: 400, the connection closed, before any route.
                for bytes in [Array("HELLO THERE\r\n\r\n".utf8), Self.request("GET /healthz HTTP/1.1\nHost: fanout\nX-Big: " + String(repeating: "a", count: 200_000))] {
                    let answer = try await Self.exchange(port, bytes)
                    #expect(answer.hasPrefix("HTTP/1.1 400") && answer.contains("Connection: close"), "\(answer.prefix(200))")
                }
                // Unknown paths and methods, missing and wrong credentials: Google's shape.
                let cases: [(String, String, String)] = [
                    ("GET /nowhere HTTP/1.1\nHost: fanout", "404", "NOT_FOUND"),
                    ("PATCH /healthz HTTP/1.1\nHost: fanout", "404", "NOT_FOUND"),
                    ("\(send)\nContent-Length: 2", "401", "UNAUTHENTICATED"),
                    ("\(send)\nAuthorization: Bearer not-a-key\nContent-Length: 2", "401", "UNAUTHENTICATED"),
                    ("\(send)\nAuthorization: Basic YWRtaW46YWRtaW4=\nContent-Length: 2", "401", "UNAUTHENTICATED"),
                    ("\(send)\n\(admin)\nContent-Length: 2", "400", "INVALID_ARGUMENT"),
                ]
                for (head, status, name) in cases {
                    let answer = try await Self.exchange(port, Self.request(head, body: Array("{}".utf8)))
                    #expect(answer.hasPrefix("HTTP/1.1 \(status)"), "\(head): \(answer.prefix(200))")
                    #expect(answer.contains(#""status":"\#(name)""#) && answer.contains(#""error":{"code":\#(status)"#), "\(head): \(answer)")
                }
                // A body announced at 100 MB, of which 2 MB are sent: refused once past the limit,
                // without waiting for the rest (which never comes: only the limit's refusal names
                // the body).
                let huge = try await Self.exchange(port, Self.request("\(send)\n\(admin)\nContent-Length: 100000000", body: [UInt8](repeating: 120, count: 2_000_000)))
                #expect(huge.hasPrefix("HTTP/1.1 400") && huge.contains(#""field":"body""#), "\(huge.prefix(300))")
                // A body that is not JSON, or JSON of the wrong shape.
                for body in ["\u{FF}\u{FE}", "[1,2]", #"{"message":"x"}"#] {
                    let answer = try await Self.exchange(port, Self.request("\(send)\n\(admin)\nContent-Length: \(body.utf8.count)", body: Array(body.utf8)))
                    #expect(answer.hasPrefix("HTTP/1.1 400") && answer.contains(#""status":"INVALID_ARGUMENT""#), "\(body): \(answer.prefix(300))")
                }
                // Still serving.
                let health = try await Self.exchange(port, Self.request("GET /healthz HTTP/1.1\nHost: fanout"))
                #expect(health.hasPrefix("HTTP/1.1 200") && health.hasSuffix(#"{"status":"ok"}"#))
            }
        }
    }
}
