/// What opening a data directory found and did.
public struct RecoveryReport: Hashable, Sendable {
    /// The snapshot recovery started from: its file, LSN and record count.
    public var snapshot: (file: String, lsn: UInt64, records: Int)?
    /// Snapshots that could not be read (newer than the one used), with why; they were moved to
    /// `quarantine/` because an older base holds everything they did.
    public var skippedSnapshots: [String] = []
    /// What the check of the directory found that start-up could deal with without losing
    /// anything (a torn tail, a missing manifest, a damaged snapshot), one line each.
    public var problems: [String] = []
    /// Segment files read.
    public var segments: Int
    /// Log records replayed after the snapshot.
    public var records: Int
    /// The LSN the next record gets.
    public var nextLSN: UInt64
    /// A torn tail of the newest segment that was cut off (its bytes kept in `quarantine/`): the
    /// file, the offset it was cut at, and why.
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
