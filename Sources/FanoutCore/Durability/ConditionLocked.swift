#if canImport(Glibc)
import Glibc
#endif

/// A value read and written only with its lock held, with the lock's two conditions for waiting:
/// the type of the WAL writer's shared state (and the in-memory log's). Nothing outside reaches
/// the value except through `withLock`, whose body runs with the mutex held; a wait releases the
/// mutex only between accesses, never during one.
final class ConditionLocked<State> {
    private let lock = ConditionLock()
    private var state: State

    init(_ state: State) {
        self.state = state
    }

    func withLock<T, Failure: Error>(_ body: (inout State) throws(Failure) -> T) throws(Failure) -> T {
        self.lock.lock()
        defer { self.lock.unlock() }
        return try body(&self.state)
    }

    /// Waits on `condition` until `isReady` says so (checked with the lock held), then runs `body`
    /// with the lock still held.
    func withLock<T, Failure: Error>(
        waitingOn condition: ConditionLock.Condition,
        until isReady: (inout State) -> Bool,
        _ body: (inout State) throws(Failure) -> T
    ) throws(Failure) -> T {
        self.lock.lock()
        defer { self.lock.unlock() }
        while !isReady(&self.state) { self.lock.wait(condition) }
        return try body(&self.state)
    }

    /// The same, waiting on a caller's own condition variable (so that a signal wakes only it).
    func withLock<T>(
        waitingOn condition: UnsafeMutablePointer<pthread_cond_t>,
        until isReady: (inout State) -> Bool,
        _ body: (inout State) -> T
    ) -> T {
        self.lock.lock()
        defer { self.lock.unlock() }
        while !isReady(&self.state) { self.lock.wait(on: condition) }
        return body(&self.state)
    }

    /// Waits on `.work` until `isReady`, or, given `milliseconds`, at most that long once; then
    /// runs `body` with the lock held.
    func withLock<T>(
        waitingForWorkAtMost milliseconds: Int?,
        until isReady: (inout State) -> Bool,
        _ body: (inout State) -> T
    ) -> T {
        self.lock.lock()
        defer { self.lock.unlock() }
        while !isReady(&self.state) {
            if let milliseconds {
                self.lock.wait(milliseconds: milliseconds)
                break
            }
            self.lock.wait(.work)
        }
        return body(&self.state)
    }

    /// Wakes one waiter of `condition`: from a body, with the lock held, or after a body made the
    /// change the waiter waits for (a waiter checks it with the lock held and waits releasing the
    /// lock atomically, so it either sees the change or gets the signal; woken outside the lock,
    /// it does not then wait for the signaller's).
    func signal(_ condition: ConditionLock.Condition) { self.lock.signal(condition) }

    /// Wakes every waiter of `condition` (call from a body, with the lock held).
    func broadcast(_ condition: ConditionLock.Condition) { self.lock.broadcast(condition) }
}

// Safe to share when the state is: `state` is accessed only inside the methods above, each with
// `lock` held.
extension ConditionLocked: @unchecked Sendable where State: Sendable {}
