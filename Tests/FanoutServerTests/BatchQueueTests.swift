@testable import FanoutClient
import FanoutTestSupport
import Testing

/// The queue between a client connection's handler and the task reading an attachment's
/// deliveries: batches of what has arrived, in order, an end that drains first.
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
        queue.append(contentsOf: [7, 8])
        #expect(try await batch == [7, 8])
    }

    /// Appends of single elements and of arrays (empty ones too), taken with random maximums:
    /// every batch holds the next `min(maximum, queued)` elements in the order they came.
    @Test func batchesAreCutAndJoinedInOrder() async throws {
        var random = SeededRandomNumberGenerator(seed: 18)
        let queue = BatchQueue<Int>()
        var model: [Int] = []
        var next = 0
        for _ in 0..<2000 {
            switch Int.random(in: 0..<3, using: &random) {
            case 0:
                queue.append(next)
                model.append(next)
                next += 1
            case 1:
                let count = Int.random(in: 0...6, using: &random)
                let values = Array(next..<(next + count))
                queue.append(contentsOf: values)
                model += values
                next += count
            default:
                guard !model.isEmpty else { continue }
                let maximum = Int.random(in: 1...8, using: &random)
                let batch = try await queue.nextBatch(maximum: maximum)
                let expected = Array(model.prefix(maximum))
                #expect(batch == expected)
                model.removeFirst(expected.count)
            }
        }
        queue.finish()
        var rest: [Int] = []
        while case let batch = try await queue.nextBatch(), !batch.isEmpty { rest += batch }
        #expect(rest == model)
    }
}
