internal import HTTPTypes
internal import NIOCore
internal import NIOHTTP1
internal import NIOHTTPTypes

/// What `MessagesSendHandler` reads of a send's request head.
struct SendRequestHead {
    /// The project in the path, not yet checked.
    let project: String
    /// `Authorization`'s value.
    let authorization: String?
    /// `x-goog-api-key`'s value.
    let googleAPIKey: String?
    /// Whether the connection closes after the answer (`Connection: close`, or HTTP/1.0 without
    /// keep-alive).
    let closesConnection: Bool

    /// The project of `POST /v1/projects/{project}/messages:send` (any query ignored, as the
    /// router ignores it); nil for any other path.
    static func sendProject(ofPath path: String) -> String? {
        var path = path
        return path.withUTF8 { bytes in
            let end = bytes.firstIndex(of: UInt8(ascii: "?")) ?? bytes.endIndex
            let path = UnsafeBufferPointer(rebasing: bytes[..<end])
            let prefix = Self.prefix, suffix = Self.suffix
            guard path.count > prefix.count + suffix.count,
                path.starts(with: prefix), path[(path.count - suffix.count)...].elementsEqual(suffix)
            else { return nil }
            let project = path[prefix.count..<(path.count - suffix.count)]
            guard !project.contains(UInt8(ascii: "/")) else { return nil }
            return String(decoding: project, as: UTF8.self)
        }
    }

    private static let prefix = Array("/v1/projects/".utf8)
    private static let suffix = Array("/messages:send".utf8)
}

/// What `MessagesSendHandler` writes as a send's answer head (its body is JSON).
struct SendResponseHead {
    let status: Int
    let contentLength: Int
    /// The `Date` header's value.
    let date: String
    /// `Retry-After`'s value, when a quota refused the send.
    let retryAfter: String?
    let closesConnection: Bool
}

/// A request part, as `MessagesSendHandler` sees it.
enum SendRequestPart {
    /// A request's head: what the handler needs of it when it is a send, nil when it is not.
    case head(SendRequestHead?)
    case body(ByteBuffer)
    case end
}

/// The request and response parts of one HTTP codec, as `MessagesSendHandler` reads and writes
/// them: NIOHTTP1's on an HTTP/1.1 connection (before Hummingbird converts them to HTTP types, which
/// a send then never pays for), HTTP types' on an HTTP/2 stream.
protocol SendHandlerParts {
    associatedtype RequestPart
    associatedtype ResponsePart

    static func classify(_ part: RequestPart) -> SendRequestPart
    static func head(_ head: SendResponseHead) -> ResponsePart
    static func body(_ bytes: ByteBuffer) -> ResponsePart
    static var end: ResponsePart { get }
    static func isEnd(_ part: ResponsePart) -> Bool
}

/// NIOHTTP1's parts.
enum HTTP1Parts: SendHandlerParts {
    static func classify(_ part: HTTPServerRequestPart) -> SendRequestPart {
        switch part {
        case .head(let head):
            guard head.method == .POST, let project = SendRequestHead.sendProject(ofPath: head.uri) else { return .head(nil) }
            return .head(
                SendRequestHead(
                    project: project,
                    authorization: head.headers.first(name: "authorization"),
                    googleAPIKey: head.headers.first(name: "x-goog-api-key"),
                    closesConnection: !head.isKeepAlive
                )
            )
        case .body(let bytes): return .body(bytes)
        case .end: return .end
        }
    }

    static func head(_ head: SendResponseHead) -> HTTPServerResponsePart {
        var headers = HTTPHeaders()
        headers.reserveCapacity(5)
        headers.add(name: "Content-Type", value: "application/json; charset=UTF-8")
        headers.add(name: "Content-Length", value: String(head.contentLength))
        headers.add(name: "Date", value: head.date)
        if let retryAfter = head.retryAfter { headers.add(name: "Retry-After", value: retryAfter) }
        if head.closesConnection { headers.add(name: "Connection", value: "close") }
        return .head(HTTPResponseHead(version: .http1_1, status: HTTPResponseStatus(statusCode: head.status), headers: headers))
    }

    static func body(_ bytes: ByteBuffer) -> HTTPServerResponsePart { .body(.byteBuffer(bytes)) }
    static var end: HTTPServerResponsePart { .end(nil) }

    static func isEnd(_ part: HTTPServerResponsePart) -> Bool {
        if case .end = part { return true }
        return false
    }
}

/// HTTP types' parts.
enum HTTPTypesParts: SendHandlerParts {
    static func classify(_ part: HTTPRequestPart) -> SendRequestPart {
        switch part {
        case .head(let head):
            guard head.method == .post, let path = head.path, let project = SendRequestHead.sendProject(ofPath: path) else { return .head(nil) }
            let fields = head.headerFields
            return .head(
                SendRequestHead(
                    project: project,
                    authorization: fields.first { $0.name == .authorization }?.value,
                    googleAPIKey: fields.first { $0.name == HTTPFront.googleAPIKey }?.value,
                    closesConnection: fields[.connection].map { $0.lowercased() == "close" } ?? false
                )
            )
        case .body(let bytes): return .body(bytes)
        case .end: return .end
        }
    }

    static func head(_ head: SendResponseHead) -> HTTPResponsePart {
        var fields: HTTPFields = [
            .contentType: "application/json; charset=UTF-8",
            .contentLength: String(head.contentLength),
            .date: head.date,
        ]
        fields[.retryAfter] = head.retryAfter
        if head.closesConnection { fields[.connection] = "close" }
        return .head(HTTPResponse(status: .init(code: head.status), headerFields: fields))
    }

    static func body(_ bytes: ByteBuffer) -> HTTPResponsePart { .body(bytes) }
    static var end: HTTPResponsePart { .end(nil) }

    static func isEnd(_ part: HTTPResponsePart) -> Bool {
        if case .end = part { return true }
        return false
    }
}
