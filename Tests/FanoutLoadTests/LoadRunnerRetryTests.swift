import FanoutCore
@testable import FanoutLoad
import Synchronization
import Testing

/// A closed loop's operations answered `UNAVAILABLE` are sent again after each of the retries'
/// waits, and counted once, by their last answer; other errors are not sent again.
@Suite struct LoadRunnerRetryTests {
    private static let threeTries = UnavailableRetries(backoffs: [.zero, .zero])

    /// Runs one worker over `count` operations; `failures(index, attempt)` is the error try
    /// `attempt` (from 0) of operation `index` fails with, or nil when it succeeds (10 items).
    private func run(count: Int, retries: UnavailableRetries, _ failures: @escaping @Sendable (Int, Int) -> FanoutError?) async -> (PhaseRecorder, tries: Int) {
        let triesOf = Mutex<[Int: Int]>([:])
        let recorder = await LoadRunner.takeTurns(count: count, next: Counter(), done: Counter(), retries: retries) { index in
            let attempt = triesOf.withLock { tries -> Int in
                defer { tries[index, default: 0] += 1 }
                return tries[index, default: 0]
            }
            if let error = failures(index, attempt) { throw error }
            return 10
        }
        return (recorder, triesOf.withLock { $0.values.reduce(0, +) })
    }

    @Test func anOperationAnsweredUnavailableIsSentAgainUntilItSucceeds() async {
        let (recorder, tries) = await self.run(count: 3, retries: Self.threeTries) { index, attempt in
            index == 1 && attempt < 2 ? FanoutError(.unavailable, "no owner") : nil
        }
        #expect(recorder.operations == 3 && recorder.items == 30 && recorder.errors.isEmpty)
        #expect(recorder.retries == 2 && tries == 5)
    }

    @Test func anOperationStillUnavailableAfterEveryRetryCountsAsOneError() async {
        let (recorder, tries) = await self.run(count: 2, retries: Self.threeTries) { index, _ in
            index == 0 ? FanoutError(.unavailable, "no owner") : nil
        }
        #expect(recorder.operations == 1 && recorder.errors == ["UNAVAILABLE": 1])
        #expect(recorder.retries == 2 && tries == 4)
    }

    @Test func otherErrorsAndPhasesWithoutRetriesAreNotSentAgain() async {
        let (invalid, invalidTries) = await self.run(count: 2, retries: Self.threeTries) { _, _ in FanoutError(.invalidArgument, "bad") }
        #expect(invalid.errors == ["INVALID_ARGUMENT": 2] && invalid.retries == 0 && invalidTries == 2)
        let (unretried, unretriedTries) = await self.run(count: 2, retries: .none) { _, _ in FanoutError(.unavailable, "no owner") }
        #expect(unretried.errors == ["UNAVAILABLE": 2] && unretried.retries == 0 && unretriedTries == 2)
    }

    @Test func theTableShowsAPhasesRetries() {
        var recorder = PhaseRecorder()
        recorder.recordRetry()
        recorder.record(.milliseconds(1), error: FanoutError(.unavailable, "no owner"))
        var report = LoadReport(workload: LoadWorkload(seed: 1, installations: 10, topics: 1), durability: "always", options: LoadOptions())
        report.phases = [PhaseResult(system: "fanout", phase: "send-topic", itemName: "recipients", recorder: recorder, elapsed: .seconds(1), cpuSeconds: nil, residentBytes: nil)]
        #expect(report.phases[0].retries == 1)
        #expect(report.table.contains("UNAVAILABLE 1 (retried 1)"))
    }
}
