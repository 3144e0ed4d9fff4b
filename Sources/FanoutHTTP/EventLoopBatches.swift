internal import NIOCore
internal import Synchronization

/// Work handed to event loops from other threads in batches: the first item queued for a loop
/// schedules one `execute`, which runs every item queued for it by then, in order. The log's
/// writer releases many sends at each sync, each to its connection's loop; one `execute` each
/// would take the loop's task lock and wake it once per send.
final class EventLoopBatches: Sendable {
    private final class Queue: Sendable {
        let items = Mutex<[@Sendable () -> Void]>([])
    }

    private let queues = Mutex<[ObjectIdentifier: Queue]>([:])

    /// Runs `work` on `eventLoop`, after whatever was queued for it before.
    func submit(to eventLoop: any EventLoop, _ work: @escaping @Sendable () -> Void) {
        let key = ObjectIdentifier(eventLoop as AnyObject)
        let queue = self.queues.withLock { queues in
            if let queue = queues[key] { return queue }
            let queue = Queue()
            queues[key] = queue
            return queue
        }
        let isFirst = queue.items.withLock { items in
            items.append(work)
            return items.count == 1
        }
        guard isFirst else { return }
        eventLoop.execute {
            let batch = queue.items.withLock { items in
                var taken: [@Sendable () -> Void] = []
                swap(&taken, &items)
                return taken
            }
            for work in batch { work() }
        }
    }
}
