import CNATS
package import FanoutCore
import Synchronization

/// A subscription on core NATS (not JetStream): its handler runs on libnats' own thread for the
/// subscription, one message at a time, until `cancel()`.
package final class NATSSubscription: @unchecked Sendable {
    // Safe to share: libnats' subscription calls are thread-safe.
    private let subscription: OpaquePointer

    /// A message as a subscription receives it.
    package struct Message: Sendable {
        package var data: [UInt8]
        package var subject: String
        /// Where the publisher wants the answer, for a request.
        package var reply: String?
        /// NATS's own answer to a request whose subject nobody subscribes to.
        package var isNoResponders: Bool
    }

    /// The handler, kept alive until libnats says the subscription is closed and its handler has
    /// returned for the last time.
    final class Handler {
        let handle: @Sendable (Message) -> Void

        init(_ handle: @escaping @Sendable (Message) -> Void) {
            self.handle = handle
        }
    }

    fileprivate init(_ jetStream: JetStream, subject: String, handle: @escaping @Sendable (Message) -> Void) throws(FanoutError) {
        let handler = Unmanaged.passRetained(Handler(handle)).toOpaque()
        var subscription: OpaquePointer?
        let status = natsConnection_Subscribe(&subscription, jetStream.connection, subject, { _, _, message, closure in
            guard let message, let closure else { return }
            defer { natsMsg_Destroy(message) }
            let handler = Unmanaged<Handler>.fromOpaque(closure).takeUnretainedValue()
            let count = Int(natsMsg_GetDataLength(message))
            let data = natsMsg_GetData(message).map { Array(UnsafeRawBufferPointer(start: $0, count: count)) } ?? []
            handler.handle(Message(
                data: data,
                subject: natsMsg_GetSubject(message).map { String(cString: $0) } ?? "",
                reply: natsMsg_GetReply(message).map { String(cString: $0) },
                isNoResponders: natsMsg_IsNoResponders(message)
            ))
        }, handler)
        guard status == NATS_OK, let subscription else {
            Unmanaged<Handler>.fromOpaque(handler).release()
            throw JetStream.error("cannot subscribe to \(subject)", status)
        }
        natsSubscription_SetOnCompleteCB(subscription, { closure in
            closure.map { Unmanaged<Handler>.fromOpaque($0).release() }
        }, handler)
        self.subscription = subscription
    }

    /// Stops the subscription without losing a message NATS has already routed to it: the handler
    /// still gets every message that reached this subscription before NATS took the unsubscription
    /// (libnats' drain), and this returns once it has, or after `timeout`. Dropping them instead
    /// would leave each of their requesters waiting for an answer that never comes.
    package func cancel(timeout: Duration = .seconds(5)) {
        guard natsSubscription_Drain(self.subscription) == NATS_OK else {
            natsSubscription_Unsubscribe(self.subscription)
            return
        }
        _ = natsSubscription_WaitForDrainCompletion(self.subscription, timeout.wholeMilliseconds)
    }

    /// Messages received and waiting for the handler.
    package var pendingMessages: Int {
        var messages: Int32 = 0
        _ = natsSubscription_GetPending(self.subscription, &messages, nil)
        return Int(messages)
    }

    deinit {
        natsSubscription_Unsubscribe(self.subscription)
        natsSubscription_Destroy(self.subscription)
    }
}

extension JetStream {
    /// Calls `handle` with each message published to `subject` (NATS wildcards allowed).
    package func subscribe(_ subject: String, _ handle: @escaping @Sendable (NATSSubscription.Message) -> Void) throws(FanoutError) -> NATSSubscription {
        try NATSSubscription(self, subject: subject, handle: handle)
    }

    /// Returns once the server has processed everything this connection sent before (a
    /// subscription made on it is then registered: another connection's publish reaches it).
    package func flush(timeoutMilliseconds: Int64 = 10_000) throws(FanoutError) {
        let status = natsConnection_FlushTimeout(self.connection, timeoutMilliseconds)
        guard status == NATS_OK else { throw Self.error("cannot flush to NATS", status) }
    }

    /// Publishes `data` to `subject` on core NATS: at most once, to whoever subscribes now.
    package func publishCore(_ data: [UInt8], to subject: String, reply: String? = nil) throws(FanoutError) {
        let status = data.withUnsafeBytes { bytes in
            if let reply {
                return natsConnection_PublishRequest(self.connection, subject, reply, bytes.baseAddress, Int32(bytes.count))
            }
            return natsConnection_Publish(self.connection, subject, bytes.baseAddress, Int32(bytes.count))
        }
        guard status == NATS_OK else { throw Self.error("cannot publish to \(subject)", status) }
    }
}

/// Requests over core NATS without blocking a thread: each request names a reply subject under
/// one inbox this object subscribes to, and its answer completes the waiting caller.
package final class NATSRequester: Sendable {
    /// How a request ended.
    package enum Reply: Sendable {
        case answer([UInt8])
        /// Nobody subscribes to the subject now (NATS says so at once): the request was not
        /// delivered, so sending it again cannot apply it twice.
        case noResponders
        /// No answer in time, or NATS did not take the request: it may or may not have been applied.
        case failed(FanoutError)
    }

    private struct Caller {
        let continuation: CheckedContinuation<Reply, Never>
        let timer: Task<Void, any Error>
        let group: Group?
    }

    /// Requests to one answerer, made with `request(_:to:timeout:in:)`: those still waiting can be
    /// ended at once (`fail(_:with:)`) when the answerer is known to be gone, rather than each
    /// waiting out its timeout.
    package final class Group: Sendable {
        fileprivate let waiting = Mutex<Set<UInt64>>([])

        package init() {}
    }

    private let jetStream: JetStream
    private let inbox: String
    private let waiting: Mutex<(next: UInt64, callers: [UInt64: Caller])>
    private let subscription: Mutex<NATSSubscription?>

    package init(_ jetStream: JetStream) throws(FanoutError) {
        var inbox: UnsafeMutablePointer<CChar>?
        let status = natsInbox_Create(&inbox)
        guard status == NATS_OK, let inbox else { throw JetStream.error("cannot make an inbox", status) }
        self.inbox = String(cString: inbox)
        natsInbox_Destroy(inbox)
        self.jetStream = jetStream
        self.waiting = Mutex((1, [:]))
        self.subscription = Mutex(nil)
        let prefix = self.inbox + "."
        let subscription = try jetStream.subscribe(prefix + "*") { [weak self] message in
            guard let self, message.subject.hasPrefix(prefix), let id = UInt64(message.subject.dropFirst(prefix.count)) else { return }
            self.answer(id, message.isNoResponders ? .noResponders : .answer(message.data))
        }
        self.subscription.withLock { $0 = subscription }
    }

    deinit {
        self.subscription.withLock { $0?.cancel() }
    }

    private func answer(_ id: UInt64, _ reply: Reply) {
        guard let caller = self.waiting.withLock({ $0.callers.removeValue(forKey: id) }) else { return }
        _ = caller.group?.waiting.withLock { $0.remove(id) }
        caller.timer.cancel()
        caller.continuation.resume(returning: reply)
    }

    /// Ends every request of `group` still waiting with `.failed(error)`: they may or may not
    /// have been performed, as after a timeout. Requests made in the group later wait as usual.
    package func fail(_ group: Group, with error: FanoutError) {
        let ids = group.waiting.withLock { waiting in
            defer { waiting = [] }
            return waiting
        }
        for id in ids { self.answer(id, .failed(error)) }
    }

    /// Sends `data` to `subject` and waits at most `timeout` for the answer (or until its
    /// `group`, when given, is failed).
    package func request(_ data: [UInt8], to subject: String, timeout: Duration, in group: Group? = nil) async -> Reply {
        let id = self.waiting.withLock { waiting in
            defer { waiting.next += 1 }
            return waiting.next
        }
        return await withCheckedContinuation { (continuation: CheckedContinuation<Reply, Never>) in
            let timer = Task { [weak self] in
                try await Task.sleep(for: timeout)
                self?.answer(id, .failed(FanoutError(.unavailable, "no answer on \(subject) within \(timeout)")))
            }
            self.waiting.withLock { waiting in
                waiting.callers[id] = Caller(continuation: continuation, timer: timer, group: group)
                _ = group?.waiting.withLock { $0.insert(id) }
            }
            do throws(FanoutError) {
                try self.jetStream.publishCore(data, to: subject, reply: "\(self.inbox).\(id)")
            } catch {
                self.answer(id, .failed(error))
            }
        }
    }
}
