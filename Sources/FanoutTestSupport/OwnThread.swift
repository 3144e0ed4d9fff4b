import Foundation

/// Runs `body` on a thread of its own and returns what it returns: for a test's blocking work
/// (a child process's start and output, blocking reads, NATS's blocking calls), which on the Swift
/// concurrency pool (a thread per core) would stall every other test of the process meanwhile.
public func onOwnThread<Value: Sendable>(_ body: @escaping @Sendable () throws -> Value) async throws -> Value {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
        Thread {
            continuation.resume(with: Result { try body() })
        }.start()
    }
}
