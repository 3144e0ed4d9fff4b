import NIOCore
import NIOPosix
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A raw TCP client for the HTTP front's tests, writing exactly the bytes a careless, hostile or
/// pipelining client would.
enum RawHTTPSocket {
    /// Writes `bytes` (stopping quietly if the server closes first), then reads until `isEnough`
    /// says so of what came back, the server closes (`closed`), or `timeout` seconds pass. The socket
    /// blocks, so this runs on NIO's thread pool: on Swift concurrency's pool it would hold a thread
    /// that the router's connection tasks need (two such tests at once hung them on 2 cores).
    static func exchange(
        _ port: Int, _ bytes: [UInt8], timeout: Int, until isEnough: @escaping @Sendable ([UInt8]) -> Bool = { _ in false }
    ) async throws -> (received: [UInt8], closed: Bool) {
        try await NIOThreadPool.singleton.runIfActive {
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            try #require(descriptor >= 0)
            defer { close(descriptor) }
            let connected = try SocketAddress(ipAddress: "127.0.0.1", port: port).withSockAddr { address, size in
                connect(descriptor, address, socklen_t(size))
            }
            try #require(connected == 0)
            var wait = timeval(tv_sec: timeout, tv_usec: 0)
            setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
            var offset = 0
            while offset < bytes.count {
                let sent = bytes[offset...].withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if sent <= 0 { break }
                offset += sent
            }
            var received: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65536)
            while !isEnough(received) {
                let count = recv(descriptor, &buffer, buffer.count, 0)
                if count == 0 { return (received, true) }
                if count < 0 { break }
                received += buffer[..<count]
            }
            return (received, false)
        }
    }
}
