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
            try owner.flush()  // subscribed at the server before the requests come on another connection
            let replies = Task {
                await withTaskGroup(of: NATSRequester.Reply.self) { group in
                    for index in 0..<5 { group.addTask { await requester.request([UInt8(index)], to: "requests", timeout: .seconds(5)) } }
                    return await group.reduce(into: []) { $0.append($1) }
                }
            }
            // Not on the concurrency pool: the requests need it.
            let first = try await onOwnThread { firstArrived.wait(timeout: .now() + 30) }
            try #require(first == .success, "the first request reached the subscriber")
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

    /// Failing a group ends its requests still waiting at once, with the error given (an edge's
    /// ACK to a shard owner that died is answered when the owner is found gone, not after the
    /// timeout); a request made in the group afterwards waits for its answer as usual.
    @Test func failingAGroupEndsItsWaitingRequestsAtOnce() async throws {
        try await NATSServer.with { server in
            let owner = try JetStream(urls: server.url)
            let requester = try NATSRequester(try JetStream(urls: server.url))
            let arrived = DispatchSemaphore(value: 0)
            let subscription = try owner.subscribe("requests") { message in
                // The first request is never answered (its answerer died); the others are.
                if message.data == [1] {
                    arrived.signal()
                    return
                }
                if let reply = message.reply { try? owner.publishCore(message.data, to: reply) }
            }
            defer { subscription.cancel() }
            try owner.flush()  // subscribed at the server before the request comes on another connection
            let group = NATSRequester.Group()
            let waiting = Task { await requester.request([1], to: "requests", timeout: .seconds(60), in: group) }
            // Not on the concurrency pool: the request needs it.
            let reached = try await onOwnThread { arrived.wait(timeout: .now() + 30) }
            try #require(reached == .success, "the request reached the subscriber")
            requester.fail(group, with: FanoutError(.unavailable, "the answerer is gone"))
            let failed = await waiting.value
            guard case .failed(let error) = failed else {
                Issue.record("the request ended otherwise: \(failed)")
                return
            }
            #expect(error.message == "the answerer is gone")
            let later = await requester.request([2], to: "requests", timeout: .seconds(60), in: group)
            guard case .answer(let answer) = later else {
                Issue.record("a request after the failure was not answered: \(later)")
                return
            }
            #expect(answer == [2])
        }
    }
}
