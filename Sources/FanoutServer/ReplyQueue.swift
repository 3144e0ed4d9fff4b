internal import DequeModule
internal import FanoutCore
internal import FanoutWire
import Synchronization

/// The replies of one connection that wait for their changes to be durable, handed from the
/// reading loop to the one task that writes them. The writer takes everything queued at once, so
/// the replies one `fdatasync` made durable leave in one write and one flush. At most `limit`
/// replies wait: past that, the reading loop waits too (and reads no more requests).
final class ReplyQueue: Sendable {
    typealias Item = (requestID: UInt32, applied: Engine.Applied<ServerMessage>)

    private struct State {
        var items: Deque<Item> = []
        var finished = false
        /// The writer, waiting for items.
        var consumer: CheckedContinuation<Void, Never>?
        /// The reading loop, waiting for room.
        var producer: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())
    private let limit: Int

    init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Queues a reply; waits while `limit` replies are queued already.
    func append(_ item: Item) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let (consumer, mustWait) = self.state.withLock { state -> (CheckedContinuation<Void, Never>?, Bool) in
                // After `finish` (the writer has stopped: the connection is going) it is dropped.
                guard !state.finished else { return (nil, false) }
                state.items.append(item)
                let consumer = state.consumer
                state.consumer = nil
                if state.items.count >= self.limit {
                    state.producer = continuation
                    return (consumer, true)
                }
                return (consumer, false)
            }
            consumer?.resume()
            if !mustWait {
                continuation.resume()
            }
        }
    }

    /// No more replies will come; the writer ends once it has taken the last ones. Also called
    /// when the writer stops early, so that a reading loop waiting for room goes on.
    func finish() {
        let (consumer, producer) = self.state.withLock { state in
            state.finished = true
            defer {
                state.consumer = nil
                state.producer = nil
            }
            return (state.consumer, state.producer)
        }
        consumer?.resume()
        producer?.resume()
    }

    /// Everything queued (waiting until something is), or nil once finished and empty.
    func takeAll() async -> [Item]? {
        while true {
            let (items, producer, finished) = self.state.withLock { state in
                let items = Array(state.items)
                state.items.removeAll()
                let producer = items.isEmpty ? nil : state.producer
                if !items.isEmpty { state.producer = nil }
                return (items, producer, state.finished)
            }
            producer?.resume()
            if !items.isEmpty { return items }
            if finished { return nil }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = self.state.withLock { state -> Bool in
                    if !state.items.isEmpty || state.finished { return true }
                    state.consumer = continuation
                    return false
                }
                if ready { continuation.resume() }
            }
        }
    }
}
