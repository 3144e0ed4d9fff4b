public import Logging
public import Synchronization

/// A log handler that keeps every message with its metadata, for assertions.
public struct RecordingLogHandler: LogHandler {
    public final class Records: Sendable {
        public let entries = Mutex<[(level: Logger.Level, text: String)]>([])

        public init() {}
    }

    public let records: Records
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .trace

    public init(records: Records) {
        self.records = records
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.metadata[key] }
        set { self.metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let text = "\(event.message) \(event.metadata ?? [:])"
        self.records.entries.withLock { $0.append((event.level, text)) }
    }
}
