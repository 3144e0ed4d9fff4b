import Foundation

extension Process {
    /// SIGKILL (which cannot be blocked or handled) unless it has exited, then waits until it is gone.
    func killAndWait() {
        if self.isRunning {
            kill(self.processIdentifier, SIGKILL)
        }
        self.waitUntilExit()
    }

    /// Polls `ready` every `interval` until it gives a value, for a child that was just started:
    /// fails if the child exits first, and kills it and fails if `timeout` passes.
    /// - Parameter readiness: what `ready` waits for, in the past tense (`"listened"`).
    func waitUntilReady<Value>(
        _ name: String,
        readiness: String,
        timeout: Duration,
        polling interval: Duration,
        _ ready: () async -> Value?
    ) async throws -> Value {
        let started = ContinuousClock.now
        while true {
            if let value = await ready() { return value }
            guard self.isRunning else {
                throw LoadError("\(name) exited with status \(self.terminationStatus) before it \(readiness)")
            }
            guard ContinuousClock.now - started < timeout else {
                self.killAndWait()
                throw LoadError("\(name) had not \(readiness) within \(timeout)")
            }
            try await Task.sleep(for: interval)
        }
    }
}
