/// A `host:port` from a command line (`--listen`, `--server`, `--http`): the port after the last
/// colon (0 to 65535), the host before it, an IPv6 host's brackets taken off (`[::1]:7400`).
public struct HostAndPort: Hashable, Sendable {
    /// Empty when the text had nothing before the colon (`:7400`); a listener reads that as any address.
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// `nil` unless `text` is `host:port` with a port of 0 to 65535.
    public init?(_ text: String) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port) else {
            return nil
        }
        var host = text[..<colon]
        if host.hasPrefix("["), host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        self.host = String(host)
        self.port = port
    }
}
