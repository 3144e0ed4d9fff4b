import FanoutModel
import FanoutTestSupport
import Foundation

/// Every thread of some processes held on one CPU for a while, then given back the CPUs each
/// process had. The latency phases run a second time so: on a VM a round trip whose threads sit on
/// different CPUs pays a wake-up across CPUs (an interrupt through the hypervisor) at each hop, and
/// where the scheduler puts each system's threads changes from run to run (docs/performance.md,
/// "Round trips on one CPU"). On one CPU both systems' figures are their own work and the
/// clients'. Done with util-linux's `taskset -a` (Swift's Glibc does not import
/// `sched_setaffinity`); where it is missing or fails, `pin` gives nil.
///
/// This process is pinned while any pinning lasts and given its CPUs back when the last ends
/// (two runs of a process's tests may overlap), to the CPUs it had before the first.
struct CPUPinning {
    /// The servers and the CPUs each had.
    private let servers: [(pid: Int32, cpus: String)]

    /// Pinnings in force, and this process's CPUs from before the first.
    private static let harness = Locked<(pinnings: Int, cpus: String?)>((0, nil))

    /// Pins every thread of this process and of `servers` to the first CPU this process had;
    /// nil when a process's CPUs cannot be read or set (whatever was moved is moved back).
    static func pin(servers: [Int32]) -> CPUPinning? {
        var saved: [(pid: Int32, cpus: String)] = []
        for pid in servers {
            guard let cpus = Self.cpus(of: pid) else { return nil }
            saved.append((pid, cpus))
        }
        let own: String? = Self.harness.withLock { harness in
            if harness.pinnings == 0 {
                harness.cpus = Self.cpus(of: getpid())
            }
            guard harness.cpus != nil else { return nil }
            harness.pinnings += 1
            return harness.cpus
        }
        guard let own else { return nil }
        let pinning = CPUPinning(servers: saved)
        guard let first = own.split(whereSeparator: { $0 == "," || $0 == "-" }).first else {
            pinning.restore()
            return nil
        }
        for pid in [getpid()] + servers where !Self.taskset(["-a", "-p", "-c", String(first), String(pid)]) {
            pinning.restore()
            return nil
        }
        return pinning
    }

    /// Gives every thread of each server (those started while pinned too) the CPUs it had before
    /// `pin`, and this process its own once no other pinning lasts.
    func restore() {
        for (pid, cpus) in self.servers {
            _ = Self.taskset(["-a", "-p", "-c", cpus, String(pid)])
        }
        Self.harness.withLock { harness in
            harness.pinnings -= 1
            if harness.pinnings == 0, let cpus = harness.cpus {
                _ = Self.taskset(["-a", "-p", "-c", cpus, String(getpid())])
            }
        }
    }

    /// The CPU list of `pid`'s main thread ("0,1" or "0-3"), from `taskset -p -c`'s
    /// "pid 42's current affinity list: 0,1".
    private static func cpus(of pid: Int32) -> String? {
        guard let output = Self.run(["-p", "-c", String(pid)]),
            let list = output.split(separator: ":").last?.trimmingCharacters(in: .whitespacesAndNewlines), !list.isEmpty
        else { return nil }
        return list
    }

    /// Runs `taskset`, up to ten times: `-a` sets each thread in turn and fails when one of them
    /// ends meanwhile (against a process starting and ending threads all the time, 43 of 100
    /// `taskset -a -p` failed), so a test process's pinning sometimes failed and its one-CPU
    /// phases were skipped.
    private static func taskset(_ arguments: [String]) -> Bool {
        (0..<10).contains { _ in Self.run(arguments) != nil }
    }

    /// `taskset`'s standard output, or nil when it cannot run, fails or takes over 10 s.
    private static func run(_ arguments: [String]) -> String? {
        guard let outcome = try? ChildProcess.run("/usr/bin/taskset", arguments, timeout: .seconds(10)),
            outcome.status == 0, !outcome.timedOut
        else { return nil }
        return outcome.output
    }
}
