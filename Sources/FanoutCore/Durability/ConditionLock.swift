#if canImport(Glibc)
import Glibc
#endif

/// A pthread mutex with one condition variable, for the WAL writer's hand-offs (the
/// Synchronization module has no condition variables). Heap-allocated so the pthread objects never
/// move.
final class ConditionLock: @unchecked Sendable {
    // Safe to share: every access to the pthread objects goes through the pthread API.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>

    init() {
        self.mutex = .allocate(capacity: 1)
        self.condition = .allocate(capacity: 1)
        pthread_mutex_init(self.mutex, nil)
        pthread_cond_init(self.condition, nil)
    }

    deinit {
        pthread_cond_destroy(self.condition)
        pthread_mutex_destroy(self.mutex)
        self.condition.deallocate()
        self.mutex.deallocate()
    }

    func lock() { pthread_mutex_lock(self.mutex) }
    func unlock() { pthread_mutex_unlock(self.mutex) }

    /// Waits for a broadcast; call with the lock held.
    func wait() { pthread_cond_wait(self.condition, self.mutex) }

    /// Waits for a broadcast or `milliseconds`; call with the lock held.
    func wait(milliseconds: Int) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var deadline = timespec()
        let nanoseconds = Int(now.tv_nsec) + (milliseconds % 1000) * 1_000_000
        deadline.tv_sec = now.tv_sec + milliseconds / 1000 + nanoseconds / 1_000_000_000
        deadline.tv_nsec = nanoseconds % 1_000_000_000
        pthread_cond_timedwait(self.condition, self.mutex, &deadline)
    }

    func broadcast() { pthread_cond_broadcast(self.condition) }

    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        self.lock()
        defer { self.unlock() }
        return try body()
    }
}
