#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A wall-clock instant: milliseconds since the UNIX epoch, UTC.
public struct Timestamp: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var millisecondsSinceEpoch: Int64

    public init(millisecondsSinceEpoch: Int64) {
        self.millisecondsSinceEpoch = millisecondsSinceEpoch
    }

    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool {
        lhs.millisecondsSinceEpoch < rhs.millisecondsSinceEpoch
    }

    /// This instant moved by `duration` (saturating, never traps).
    public func advanced(by duration: Duration) -> Timestamp {
        let (seconds, attoseconds) = duration.components
        let millis = seconds.multipliedReportingOverflow(by: 1000)
        let delta = millis.overflow ? (seconds < 0 ? Int64.min : Int64.max) : millis.partialValue
        let total = delta.addingReportingOverflow(attoseconds / 1_000_000_000_000_000)
        let (sum, overflow) = self.millisecondsSinceEpoch.addingReportingOverflow(total.partialValue)
        if overflow || total.overflow {
            return Timestamp(millisecondsSinceEpoch: delta < 0 ? .min : .max)
        }
        return Timestamp(millisecondsSinceEpoch: sum)
    }

    /// Whole seconds since the epoch (JWT times, APNs expirations).
    public var secondsSinceEpoch: Int64 { self.millisecondsSinceEpoch / 1000 }

    public init(secondsSinceEpoch seconds: Int64) {
        self.init(millisecondsSinceEpoch: seconds * 1000)
    }

    public var description: String { "\(self.millisecondsSinceEpoch)ms" }

    /// ISO 8601 in UTC with milliseconds: `2026-01-01T00:00:00.000Z`.
    public var iso8601: String {
        let milliseconds = self.millisecondsSinceEpoch
        var seconds = time_t(milliseconds.quotient(dividingBy: 1000))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func digits(_ value: Int32, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(digits(parts.tm_year + 1900, 4))-\(digits(parts.tm_mon + 1, 2))-\(digits(parts.tm_mday, 2))T"
            + "\(digits(parts.tm_hour, 2)):\(digits(parts.tm_min, 2)):\(digits(parts.tm_sec, 2))."
            + "\(digits(Int32(milliseconds - milliseconds.quotient(dividingBy: 1000) * 1000), 3))Z"
    }
}

extension Int64 {
    /// Division rounding toward negative infinity (so that times before 1970 split correctly).
    fileprivate func quotient(dividingBy divisor: Int64) -> Int64 {
        let (quotient, remainder) = self.quotientAndRemainder(dividingBy: divisor)
        return remainder < 0 ? quotient - 1 : quotient
    }
}

/// Where the engine reads the time. Injected, so that tests can move it.
public protocol WallClock: Sendable {
    /// The current instant.
    func now() -> Timestamp
}

/// The system's real-time clock (`CLOCK_REALTIME`).
public struct SystemWallClock: WallClock {
    public init() {}

    public func now() -> Timestamp {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Timestamp(millisecondsSinceEpoch: Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000)
    }
}
