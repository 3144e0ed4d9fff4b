#if canImport(Glibc)
import Glibc
#endif

/// Loopback ports for servers started by tests and the load harness.
public enum LoopbackPort {
    /// A port nobody listens on now on 127.0.0.1: the kernel's pick for a socket bound to port 0,
    /// free again when this returns (for a server that must be told its port, such as a
    /// nats-server's route or Redis).
    public static func free() throws -> Int {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw LoopbackPortError(errno: errno) }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) == 0 && getsockname(socket, $0, &length) == 0 }
        }
        guard bound else { throw LoopbackPortError(errno: errno) }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

/// No loopback port could be had.
public struct LoopbackPortError: Error, CustomStringConvertible {
    public var errno: Int32
    public var description: String { "cannot bind a loopback port: errno \(self.errno)" }
}
