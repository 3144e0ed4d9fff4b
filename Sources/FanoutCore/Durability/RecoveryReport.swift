/// What opening a data directory found and did.
public struct RecoveryReport: Hashable, Sendable {
    /// The snapshot recovery started from: its file, LSN and record count.
    public var snapshot: (file: String, lsn: UInt64, records: Int)?
    /// Snapshots that could not be read (newer than the one used), with why.
    public var skippedSnapshots: [String] = []
    /// Segment files read.
    public var segments: Int
    /// Log records replayed after the snapshot.
    public var records: Int
    /// The LSN the next record gets.
    public var nextLSN: UInt64
    /// A damaged tail of the last segment that was cut off: the file, the offset it was cut at,
    /// and why (a torn write from a crash, usually).
    public var truncatedTail: (file: String, offset: Int, reason: String)?
    /// Wall-clock time from opening the directory to serving.
    public var duration: Duration

    public static func == (lhs: RecoveryReport, rhs: RecoveryReport) -> Bool {
        lhs.segments == rhs.segments && lhs.records == rhs.records && lhs.nextLSN == rhs.nextLSN
            && lhs.truncatedTail?.file == rhs.truncatedTail?.file && lhs.truncatedTail?.offset == rhs.truncatedTail?.offset
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.segments)
        hasher.combine(self.records)
        hasher.combine(self.nextLSN)
    }
}
