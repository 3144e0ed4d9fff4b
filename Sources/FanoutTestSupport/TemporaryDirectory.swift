import Foundation

/// Fresh data directories for tests: a unique path under the system's temporary directory (the
/// engine creates it), removed with everything in it when the body returns.
public enum TemporaryDirectory {
    public static func path(_ prefix: String = "fanout-test") -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)").path
    }

    public static func with<T>(_ prefix: String = "fanout-test", _ body: (String) throws -> T) rethrows -> T {
        let path = Self.path(prefix)
        defer { try? FileManager.default.removeItem(atPath: path) }
        return try body(path)
    }

    public static func with<T>(_ prefix: String = "fanout-test", _ body: (String) async throws -> T) async rethrows -> T {
        let path = Self.path(prefix)
        defer { try? FileManager.default.removeItem(atPath: path) }
        return try await body(path)
    }
}
