import FanoutLoad
import Foundation
import Testing

/// `fanout-load floor`, the bare SwiftNIO listener `scripts/ping-latency.py --floor` measures:
/// every whole frame gets an empty frame with the reply bit and the same request id, however the
/// frames are split across writes, and all of them in order.
@Suite("Floor server")
struct FloorServerTests {
    /// A frame header: version 2, `opcode`, no flags, `id`, `length` payload bytes.
    static func header(opcode: UInt8, id: UInt32, length: UInt32) -> [UInt8] {
        [2, opcode, 0, 0] + withUnsafeBytes(of: id.bigEndian, Array.init) + withUnsafeBytes(of: length.bigEndian, Array.init)
    }

    /// A blocking socket connected to `port` on loopback, its reads given up after 10 s.
    static func connected(to port: Int) -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #expect(descriptor >= 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        #expect(connected == 0)
        // A reply that never comes fails the test instead of hanging it.
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        return descriptor
    }

    @Test func answersEveryFrameWithAnEmptyReplyInOrder() async throws {
        let server = try await FloorServer.start(host: "127.0.0.1", port: 0)
        let descriptor = Self.connected(to: server.port)
        defer { close(descriptor) }

        // HELLO with a 5-byte payload and PING in one write; a GET_INSTALLATION cut in two writes.
        let first = Self.header(opcode: 0x01, id: 1, length: 5) + [1, 2, 3, 4, 5] + Self.header(opcode: 0x02, id: 2, length: 0)
        let third = Self.header(opcode: 0x23, id: 7, length: 3) + [9, 9, 9]
        for part in [first, Array(third[..<10]), Array(third[10...])] {
            #expect(part.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, 0) } == part.count)
        }
        var received: [UInt8] = []
        while received.count < 36 {
            var chunk = [UInt8](repeating: 0, count: 64)
            let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { break }
            received += chunk[..<count]
        }
        #expect(received == Self.header(opcode: 0x81, id: 1, length: 0) + Self.header(opcode: 0x82, id: 2, length: 0) + Self.header(opcode: 0xA3, id: 7, length: 0))
        try await server.close()
    }

    /// A frame that says it is longer than fanoutd's maximum is not waited for: the connection closes.
    @Test func aFrameOverTheMaximumClosesTheConnection() async throws {
        let server = try await FloorServer.start(host: "127.0.0.1", port: 0)
        let descriptor = Self.connected(to: server.port)
        defer { close(descriptor) }
        let header = Self.header(opcode: 0x02, id: 1, length: 2 * 1024 * 1024 + 1)
        #expect(header.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, 0) } == header.count)
        var chunk = [UInt8](repeating: 0, count: 16)
        #expect(chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) } == 0, "closed, nothing answered")
        try await server.close()
    }
}
