@testable import FanoutWire
import Testing

/// The queue between a connection's producers and its one consumer task (server replies, client
/// deliveries): batches of what has arrived, an end that drains first, a bound on the producer.
@Suite("Batch queue")
struct BatchQueueTests {
    struct Failure: Error, Equatable {}

    @Test func batchesDrainBeforeTheEndAndItsError() async throws {
        let queue = BatchQueue<Int>()
        for value in 1...3 { queue.append(value) }
        #expect(try await queue.nextBatch(maximum: 2) == [1, 2])
        queue.finish(throwing: Failure())
        queue.append(4)  // after the end: dropped
        #expect(try await queue.nextBatch() == [3], "what was queued before the end still comes")
        await #expect(throws: Failure.self) { try await queue.nextBatch() }
    }

    @Test func aPlainEndIsAnEmptyBatch() async throws {
        let queue = BatchQueue<Int>()
        queue.finish()
        #expect(try await queue.nextBatch().isEmpty)
        #expect(try await queue.nextBatch().isEmpty, "and stays so")
    }

    @Test func aWaitingConsumerGetsWhatArrives() async throws {
        let queue = BatchQueue<Int>()
        async let batch = queue.nextBatch()
        queue.append(7)
        #expect(try await batch == [7])
    }

    /// A producer that never went on would hang the test: the time limit makes that a failure.
    @Test(.timeLimit(.minutes(1)))
    func theProducerGoesOnWhenTheConsumerTakesOrTheQueueEnds() async throws {
        let queue = BatchQueue<Int>(limit: 2)
        await queue.appendWaitingForRoom(1)  // under the limit: returns at once
        async let second: Void = queue.appendWaitingForRoom(2)  // at the limit: waits for the consumer
        var received: [Int] = []
        while received.count < 2 {
            received += try await queue.nextBatch()
        }
        await second
        #expect(received == [1, 2])

        // Whether it is already waiting or comes after the end, the producer goes on.
        let ended = BatchQueue<Int>(limit: 1)
        async let blocked: Void = ended.appendWaitingForRoom(1)
        ended.finish()
        await blocked
    }
}
