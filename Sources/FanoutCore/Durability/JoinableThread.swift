import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A thread of its own running `body` once: `join()` waits for it (once; later calls return at
/// once), and a thread never joined is detached when this is released. Recovery's reader and
/// reverse-list threads, the start-up scan's second reader and the replicated log's publisher run
/// on one.
final class JoinableThread: Sendable {
    /// The thread, until it is joined.
    private let thread: Mutex<pthread_t?>

    /// Starts `body` on a new thread. `body` holds what it captures until it returns.
    init(_ body: @escaping () -> Void) {
        var thread = pthread_t()
        pthread_create(&thread, nil, { context in
            Unmanaged<Entry>.fromOpaque(context!).takeRetainedValue().body()
            return nil
        }, Unmanaged.passRetained(Entry(body)).toOpaque())
        self.thread = Mutex(thread)
    }

    deinit {
        // The last release may happen on the thread itself; detaching it is all there is to do.
        if let thread = self.thread.withLock({ $0 }) { pthread_detach(thread) }
    }

    /// Waits until `body` has returned.
    func join() {
        guard let thread = self.thread.withLock({ $0.take() }) else { return }
        pthread_join(thread, nil)
    }

    /// A thread's body, passed through `pthread_create`'s context pointer (which a closure cannot be).
    private final class Entry {
        let body: () -> Void

        init(_ body: @escaping () -> Void) {
            self.body = body
        }
    }
}
