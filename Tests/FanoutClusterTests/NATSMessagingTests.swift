import FanoutCluster
import FanoutCore
import FanoutTestSupport
import Foundation
import Testing

@Suite("NATS request/reply")
struct NATSMessagingTests {
    /// A subscription cancelled while requests wait for its handler still answers them: a node
    /// that loses a shard answers "not owned here" (sent again) instead of leaving the senders
    /// waiting for their timeout.
    @Test func cancellingASubscriptionAnswersTheRequestsAlreadyRoutedToIt() async throws {
        try await NATSServer.with { server in
            let owner = try JetStream(urls: server.url)
            let requester = try NATSRequester(try JetStream(urls: server.url))
            let gate = DispatchSemaphore(value: 0)
            let firstArrived = DispatchSemaphore(value: 0)
            let handled = Locked(0)
            let subscription = try owner.subscribe("requests") { message in
                if handled.withLock({ count in
                    defer { count += 1 }
                    return count == 0
                }) {
                    firstArrived.signal()
                    gate.wait()  // the handler is busy while the others queue behind it
                }
                if let reply = message.reply { try? owner.publishCore(message.data, to: reply) }
            }
            let replies = Task {
                await withTaskGroup(of: NATSRequester.Reply.self) { group in
                    for index in 0..<5 { group.addTask { await requester.request([UInt8(index)], to: "requests", timeout: .seconds(5)) } }
                    return await group.reduce(into: []) { $0.append($1) }
                }
            }
            try await onOwnThread { firstArrived.wait() }  // not on the concurrency pool: the requests need it
            while subscription.pendingMessages < 4 { try await Task.sleep(for: .milliseconds(5)) }
            // Cancelled while four wait; the handler is let go a moment later (cancel waits for it).
            let cancelled = Thread { subscription.cancel() }
            cancelled.start()
            try await Task.sleep(for: .milliseconds(200))
            gate.signal()
            let answers = await replies.value
            #expect(answers.count == 5)
            #expect(answers.allSatisfy { if case .answer = $0 { true } else { false } }, "\(answers)")
            #expect(handled.withLock { $0 } == 5)
        }
    }
}
