#if canImport(Glibc)
import Glibc
#endif

/// Whether fanoutd could listen on an address, tried with a socket that is closed at once, so that
/// a taken or unknown address fails before the data directory or a key is created.
enum ListenCheck {
    /// - Throws: `ListenError` naming the address and the system's reason.
    static func check(host: String, port: Int) throws {
        var hints = addrinfo()
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &found)
        guard status == 0, let first = found else {
            throw ListenError(description: "cannot listen on \(host):\(port): \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(found) }
        let descriptor = socket(first.pointee.ai_family, first.pointee.ai_socktype, first.pointee.ai_protocol)
        guard descriptor >= 0 else { throw Self.error(host, port) }
        defer { close(descriptor) }
        var on: Int32 = 1
        _ = setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        guard bind(descriptor, first.pointee.ai_addr, first.pointee.ai_addrlen) == 0 else { throw Self.error(host, port) }
    }

    private static func error(_ host: String, _ port: Int) -> ListenError {
        ListenError(description: "cannot listen on \(host):\(port): \(String(cString: strerror(errno)))")
    }
}

/// fanoutd cannot listen where it was told to (exit status 1, no usage text).
struct ListenError: Error, CustomStringConvertible {
    var description: String
}
