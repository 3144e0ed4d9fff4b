import FanoutCore
import FanoutTestSupport

#if canImport(Glibc)
import Glibc
#endif

/// The child of the crash test (Tests/FanoutCLITests/CrashTests.swift): runs the seeded workload
/// from operation `from` on a durable engine (durability `always`) and writes `ack N` to stdout
/// after operation N returns, until it is killed.
///
/// Usage: fanout-crash-child DIRECTORY SEED FROM COUNT
@main
enum CrashChild {
    static func main() async {
        let arguments = CommandLine.arguments
        guard arguments.count == 5, let seed = UInt64(arguments[2]), let from = Int(arguments[3]), let count = Int(arguments[4]) else {
            say("usage: fanout-crash-child DIRECTORY SEED FROM COUNT", to: 2)
            exit(2)
        }
        let workload = CrashWorkload(seed: seed, count: count)
        let clock = StepClock(startingAt: from)
        let engine: Engine
        do {
            engine = try Engine(directory: arguments[1], durability: .always, clock: clock)
        } catch {
            say("cannot open: \(error)", to: 2)
            exit(1)
        }
        for index in from..<count {
            clock.set(step: index)
            await CrashWorkload.apply(workload.operations[index], to: engine)
            say("ack \(index)", to: 1)
        }
        try? engine.close()
    }
}

/// Writes a line straight to a file descriptor (no buffering: the parent may kill us any time).
func say(_ text: String, to descriptor: Int32) {
    var line = text + "\n"
    line.withUTF8 { _ = write(descriptor, $0.baseAddress, $0.count) }
}
