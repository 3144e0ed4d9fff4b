import Foundation

/// What a process uses, read from `/proc/PID`: resident memory and CPU time so far.
public struct ProcessResources: Hashable, Sendable, Codable {
    /// Resident set size, bytes.
    public var residentBytes: Int
    /// User plus system CPU time, seconds.
    public var cpuSeconds: Double

    public init(residentBytes: Int, cpuSeconds: Double) {
        self.residentBytes = residentBytes
        self.cpuSeconds = cpuSeconds
    }

    /// This process's figures now.
    public static func ofThisProcess() -> ProcessResources? {
        Self.of(pid: getpid())
    }

    /// The process's figures now, or nil when it is gone (or this is not Linux).
    public static func of(pid: Int32) -> ProcessResources? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        else { return nil }
        // "VmRSS:	  123456 kB"
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
            let kilobytes = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first.flatMap({ Int($0) })
        else { return nil }
        // The command name (field 2) may hold spaces; the fields after its closing parenthesis
        // start with field 3, so utime and stime (14 and 15) are the 12th and 13th of them.
        guard let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        return ProcessResources(residentBytes: kilobytes * 1024, cpuSeconds: (user + system) / ticks)
    }
}
