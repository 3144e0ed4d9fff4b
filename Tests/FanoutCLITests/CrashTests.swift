import FanoutCore
import FanoutTestSupport
import Foundation
import Testing

/// kill -9 at random moments: a child process (`fanout-crash-child`) runs a seeded workload on a
/// durable engine with durability `always` and reports each acknowledged operation on a pipe; the
/// parent kills it with SIGKILL, opens the directory, and checks that every acknowledged operation
/// is there (registrations, subscriptions, sends with their pending deliveries, and acknowledgements:
/// an acknowledged delivery must never come back): the state must equal the model after the
/// acknowledged prefix, or after one more
/// operation (the one in flight when the child died, whose record may have reached the disk).
///
/// Every 25 cycles the parent also takes a snapshot, so later children recover from it.
/// `FANOUT_CRASH_CYCLES` sets the number of kill cycles (20 by default, the CI short form; the long
/// form in docs/operations.md runs 500).
@Suite("Crash test")
struct CrashTests {
    static var cycles: Int {
        ProcessInfo.processInfo.environment["FANOUT_CRASH_CYCLES"].flatMap(Int.init) ?? 20
    }

    @Test func everyAcknowledgedOperationSurvivesKillMinus9() throws {
        let directory = TemporaryDirectory.path("fanout-crash")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let seed: UInt64 = 2026
        let total = 100 + Self.cycles * 80
        let workload = CrashWorkload(seed: seed, count: total)
        var random = SeededRandomNumberGenerator(seed: seed)
        let child = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("fanout-crash-child")

        var recovered = 0  // operations known to be in the directory
        var model = CrashModel(configuration: EngineConfiguration())  // after `recovered` operations
        var kills = 0
        for cycle in 0..<Self.cycles {
            let process = try ChildProcess(child.path, [directory, String(seed), String(recovered), String(total)])
            // Wait until a random number of acknowledgements has arrived, then kill -9.
            let target = Int.random(in: 1...60, using: &random)
            process.wait(for: .seconds(120)) { seen in seen.output.lazy.filter { $0 == UInt8(ascii: "\n") }.count >= target }
            process.kill()
            kills += process.current.exit == .signalled(SIGKILL) ? 1 : 0
            // The child may have finished more operations between the last line read and the
            // kill (on a busy machine, several): their acknowledgements were in the pipe, and the
            // directory must hold every one of them too.
            var acknowledged = recovered - 1
            let written = process.current.outputText
            for line in written.split(separator: "\n").dropLast(written.hasSuffix("\n") ? 0 : 1) {  // whole lines
                guard line.hasPrefix("ack "), let index = Int(line.dropFirst(4)) else {
                    Issue.record("unexpected line from the child: \(line)")
                    break
                }
                #expect(index == acknowledged + 1, "acknowledgements are in order")
                acknowledged = index
            }
            #expect(acknowledged >= recovered, "cycle \(cycle): the child acknowledged nothing")

            // Recover and compare with the models of the two possible prefixes.
            let acknowledgedCount = acknowledged + 1
            let engine = try Engine(directory: directory, durability: .none, clock: StepClock(startingAt: 0))
            let state = workload.summary(of: engine, upTo: min(total, acknowledgedCount + 1))
            if cycle % 25 == 24 {
                // Snapshots keep recovery short, and go through the kill cycles too.
                try engine.snapshot()
            }
            try engine.close()
            let afterAcknowledged = workload.advance(model, from: recovered, to: acknowledgedCount)
            let afterOneMore = acknowledgedCount < total ? workload.advance(afterAcknowledged, from: acknowledgedCount, to: acknowledgedCount + 1) : nil
            if state == CrashWorkload.summary(of: afterAcknowledged) {
                model = afterAcknowledged
                recovered = acknowledgedCount
            } else if let afterOneMore, state == CrashWorkload.summary(of: afterOneMore) {
                model = afterOneMore
                recovered = acknowledgedCount + 1
            } else {
                Issue.record("cycle \(cycle): the recovered state matches neither \(acknowledgedCount) nor \(acknowledgedCount + 1) operations")
                return
            }
        }
        #expect(kills == Self.cycles, "every cycle ended with SIGKILL")
        #expect(recovered > Self.cycles, "the workload made progress")
        #expect(model.sends > 0 && model.mailboxes.installations.values.contains { !$0.items.isEmpty }, "sends were exercised")
    }
}
