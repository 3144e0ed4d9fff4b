/// Why the harness cannot go on: a server that does not start, a tool that is missing.
public struct LoadError: Error, CustomStringConvertible, Sendable {
    public var description: String

    public init(_ description: String) {
        self.description = description
    }
}
