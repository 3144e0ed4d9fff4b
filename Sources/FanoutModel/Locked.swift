#if canImport(Glibc)
public import Glibc
#endif

/// A value behind a pthread mutex. Used for the engine's project locks instead of
/// `Synchronization.Mutex`, whose Linux implementation spins before it sleeps: with many threads
/// waiting on one project (the durability benchmark's 256 callers on 2 cores) the spinning took a
/// third of the CPU. A pthread mutex sleeps in the kernel at once.
///
/// The type is public and its members `package`: Swift 6.3 does not inline or specialize an
/// `@inlinable` member of a `package` generic type in another module (the call goes to the
/// unspecialized generic code, which instantiates metadata at run time), while it does for a
/// public type's. Nothing outside the package can make or use one.
public final class Locked<Value> {
    // Usable from inline code only so that `withLock` inlines into the modules that use it: it is
    // on every engine call's path.
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    @usableFromInline var value: Value

    package init(_ value: Value) {
        self.value = value
        self.mutex = .allocate(capacity: 1)
        pthread_mutex_init(self.mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(self.mutex)
        self.mutex.deallocate()
    }

    @inlinable
    package func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        pthread_mutex_lock(self.mutex)
        defer { pthread_mutex_unlock(self.mutex) }
        return try body(&self.value)
    }
}

// Safe to share when the value is: `value` is only touched inside `withLock`, under the mutex, so
// a value may cross threads through it only if it could cross them on its own.
extension Locked: @unchecked Sendable where Value: Sendable {}
