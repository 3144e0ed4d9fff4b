import Foundation
import FanoutCore

/// Runs a phase's operations and measures them.
public enum LoadRunner {
    /// Closed loop: `concurrency` workers take the next of `count` operations as soon as their
    /// last one is answered. `operation(index, worker)` returns how many items it carried; one
    /// answered `UNAVAILABLE` is sent again after each of `retries`' waits.
    public static func closedLoop(
        _ name: String,
        count: Int,
        concurrency: Int,
        progress: Progress,
        retries: UnavailableRetries = .none,
        operation: @escaping @Sendable (_ index: Int, _ worker: Int) async throws -> Int
    ) async -> PhaseRecorder {
        let next = Counter()
        let done = Counter()
        return await progress.track(name, total: count, done: done) {
            await Self.inParallel(max(1, min(concurrency, count))) { worker in
                await Self.takeTurns(count: count, next: next, done: done, retries: retries) { index in try await operation(index, worker) }
            }
        }
    }

    /// Runs `workers` tasks, `worker(w)` for each, and merges what they measured.
    static func inParallel(_ workers: Int, _ worker: @escaping @Sendable (Int) async -> PhaseRecorder) async -> PhaseRecorder {
        await withTaskGroup(of: PhaseRecorder.self) { group in
            for index in 0..<workers {
                group.addTask { await worker(index) }
            }
            var merged = PhaseRecorder()
            for await recorder in group {
                merged.merge(recorder)
            }
            return merged
        }
    }

    /// One worker of a closed loop: takes the next of `count` operations from `next` as soon as
    /// its last one is answered, times each (an error counts as one; an operation sent again after
    /// `UNAVAILABLE` is timed from its first try to its last answer), and counts it in `done`.
    static func takeTurns(
        count: Int, next: Counter, done: Counter, retries: UnavailableRetries = .none, _ operation: (Int) async throws -> Int
    ) async -> PhaseRecorder {
        var recorder = PhaseRecorder()
        while true {
            let index = next.add()
            guard index < count else { break }
            let start = ContinuousClock.now
            var tries = 0
            while true {
                do {
                    let items = try await operation(index)
                    recorder.record(ContinuousClock.now - start, items: items)
                } catch let error as FanoutError where error.code == .unavailable && tries < retries.backoffs.count {
                    try? await Task.sleep(for: retries.backoffs[tries])
                    tries += 1
                    recorder.recordRetry()
                    continue
                } catch {
                    recorder.record(ContinuousClock.now - start, error: error)
                }
                break
            }
            done.add()
        }
        return recorder
    }

    /// Open loop: operation `k` is due at `start + k / rate`, whether or not earlier ones were
    /// answered, and its latency counts from when it was due (so a stall shows as latency, not as
    /// fewer requests). Past `maximumInFlight` operations started and not yet collected, the loop
    /// collects one before starting the next; if they are still running, the schedule slips, which
    /// the latencies then show.
    public static func openLoop(
        _ name: String,
        rate: Int,
        duration: Duration,
        maximumInFlight: Int = 10_000,
        progress: Progress,
        operation: @escaping @Sendable (_ index: Int) async throws -> Int
    ) async -> PhaseRecorder {
        let rate = max(1, rate)
        let count = max(1, Int(duration / .seconds(1) * Double(rate)))
        let done = Counter()
        return await progress.track(name, total: count, done: done) {
            // Children return their outcome and the loop records it: a histogram per operation
            // would cost more than the operation.
            await withTaskGroup(of: (latency: Duration, items: Int, error: (any Error)?).self) { group in
                let start = ContinuousClock.now
                var recorder = PhaseRecorder()
                func record(_ outcome: (latency: Duration, items: Int, error: (any Error)?)) {
                    if let error = outcome.error {
                        recorder.record(outcome.latency, error: error)
                    } else {
                        recorder.record(outcome.latency, items: outcome.items)
                    }
                }
                var inFlight = 0
                for index in 0..<count {
                    let due = start + .nanoseconds(Int64(Double(index) * 1e9 / Double(rate)))
                    if inFlight >= maximumInFlight, let finished = await group.next() {
                        record(finished)
                        inFlight -= 1
                    }
                    try? await Task.sleep(until: due, clock: .continuous)
                    group.addTask {
                        defer { done.add() }
                        do {
                            let items = try await operation(index)
                            return (ContinuousClock.now - due, items, nil)
                        } catch {
                            return (ContinuousClock.now - due, 0, error)
                        }
                    }
                    inFlight += 1
                }
                for await finished in group {
                    record(finished)
                }
                return recorder
            }
        }
    }
}
