public import FanoutCore
import Synchronization

/// A wall clock that only moves when a test moves it.
public final class ManualClock: WallClock {
    private let current: Mutex<Timestamp>

    /// Starts at 2026-01-01T00:00:00Z unless told otherwise.
    public init(_ start: Timestamp = Timestamp(millisecondsSinceEpoch: 1_767_225_600_000)) {
        self.current = Mutex(start)
    }

    public func now() -> Timestamp {
        self.current.withLock { $0 }
    }

    /// Moves the clock forward by `duration`.
    public func advance(by duration: Duration) {
        self.current.withLock { $0 = $0.advanced(by: duration) }
    }
}

extension Duration {
    /// `days` days.
    public static func days(_ days: Int) -> Duration { .seconds(days * 86_400) }
}
