/// When a logged change counts as done.
public enum Durability: Hashable, Sendable {
    /// After `fdatasync` of the batch holding it (group commit). Nothing acknowledged is lost.
    case always
    /// After the batch is written; a background `fdatasync` runs every `milliseconds`. A crash of
    /// the machine (not of the process) may lose the last `milliseconds` of acknowledged changes.
    case interval(milliseconds: Int)
    /// After the batch is written; never synced by fanout (the OS decides). For tests and caches.
    case none
}

extension Durability {
    /// The command-line spelling (`--durability`): `always`, `none`, or `interval:MS` with a
    /// positive MS; nil for anything else.
    public init?(parsing text: String) {
        switch text {
        case "always": self = .always
        case "none": self = .none
        default:
            guard text.hasPrefix("interval:"), let milliseconds = Int(text.dropFirst("interval:".count)), milliseconds > 0 else { return nil }
            self = .interval(milliseconds: milliseconds)
        }
    }
}

/// What the write-ahead log has done since the engine opened.
public struct WALStatistics: Hashable, Sendable {
    /// Records written.
    public var records = 0
    /// Batches written (one `write` each).
    public var batches = 0
    /// `fdatasync` calls.
    public var syncs = 0
    /// Bytes written, batch headers included.
    public var bytes = 0

    public init() {}
}
