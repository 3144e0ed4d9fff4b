#if canImport(Glibc)
import Glibc
#endif

/// A pthread mutex with two condition variables, for the WAL writer's hand-offs (the
/// Synchronization module has none): the writer waits on `.work`, callers on `.acknowledged`, so
/// queueing a record wakes only the writer and a finished batch wakes only the callers.
/// Heap-allocated so the pthread objects never move.
final class ConditionLock: @unchecked Sendable {
    // Safe to share: every access to the pthread objects goes through the pthread API.
    enum Condition: Int {
        case work = 0
        case acknowledged = 1
    }

    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let conditions: UnsafeMutablePointer<pthread_cond_t>

    init() {
        self.mutex = .allocate(capacity: 1)
        self.conditions = .allocate(capacity: 2)
        pthread_mutex_init(self.mutex, nil)
        pthread_cond_init(self.conditions, nil)
        pthread_cond_init(self.conditions + 1, nil)
    }

    deinit {
        pthread_cond_destroy(self.conditions)
        pthread_cond_destroy(self.conditions + 1)
        pthread_mutex_destroy(self.mutex)
        self.conditions.deallocate()
        self.mutex.deallocate()
    }

    func lock() { pthread_mutex_lock(self.mutex) }
    func unlock() { pthread_mutex_unlock(self.mutex) }

    /// Waits for `condition`; call with the lock held.
    func wait(_ condition: Condition) { pthread_cond_wait(self.conditions + condition.rawValue, self.mutex) }

    /// Waits on a caller's own condition variable; call with the lock held.
    func wait(on condition: UnsafeMutablePointer<pthread_cond_t>) { pthread_cond_wait(condition, self.mutex) }

    /// Wakes one waiter of `condition`.
    func signal(_ condition: Condition) { pthread_cond_signal(self.conditions + condition.rawValue) }

    /// Wakes every waiter of `condition`.
    func broadcast(_ condition: Condition) { pthread_cond_broadcast(self.conditions + condition.rawValue) }

    /// Waits for `.work` or `milliseconds`; call with the lock held.
    func wait(milliseconds: Int) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var deadline = timespec()
        let nanoseconds = Int(now.tv_nsec) + (milliseconds % 1000) * 1_000_000
        deadline.tv_sec = now.tv_sec + milliseconds / 1000 + nanoseconds / 1_000_000_000
        deadline.tv_nsec = nanoseconds % 1_000_000_000
        pthread_cond_timedwait(self.conditions + Condition.work.rawValue, self.mutex, &deadline)
    }

    func withLock<T, Failure: Error>(_ body: () throws(Failure) -> T) throws(Failure) -> T {
        self.lock()
        defer { self.unlock() }
        return try body()
    }
}
