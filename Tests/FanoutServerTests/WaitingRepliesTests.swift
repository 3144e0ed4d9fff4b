@testable import FanoutServer
import FanoutTestSupport
import FanoutWire
import NIOCore
import Testing

/// A connection's waiting replies against an array model: the same replies leave in the same
/// order with the same numbers, through thousands of operations that move the front past the
/// point where the arrays are compacted, and back to empty.
@Suite("Waiting replies")
struct WaitingRepliesTests {
    @Test(arguments: [1, 2, 3] as [UInt64])
    func theyLeaveInOrderAsADequeWouldHaveThem(seed: UInt64) {
        var random = SeededRandomNumberGenerator(seed: seed)
        var replies = WaitingReplies()
        // The model: each waiting reply's request id, and its frame once answered.
        var model: [(id: UInt32, answered: Bool)] = []
        var firstNumber: UInt64 = 0
        var nextID: UInt32 = 0
        var compactions = 0
        for _ in 0..<20_000 {
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<4:
                let exchange = Exchange(id: nextID, opcode: .ping, started: .now())
                replies.append(.answeredElsewhere(nil), answering: exchange)
                model.append((nextID, false))
                nextID += 1
            case 4..<7 where model.count > 50:
                // Near the front, never the last 50: the front moves on while replies keep
                // waiting behind it (the arrays are compacted once it is 1024 ahead).
                let first = model.firstIndex { !$0.answered } ?? 0
                let offset = min(Bool.random(using: &random) ? first : Int.random(in: 0..<8, using: &random), model.count - 51)
                replies.answer(firstNumber + UInt64(offset), with: ServerFrame(requestID: model[offset].id, message: .pong))
                model[offset].answered = true
            default:
                // Everything answered at the front leaves; the first not answered is put back.
                while let first = replies.takeFirst() {
                    guard case .answeredElsewhere(let frame?) = first else {
                        #expect(!(model.first?.answered ?? true), "a reply the model holds answered was not")
                        replies.putBackFirst(first)
                        break
                    }
                    let expected = model.removeFirst()
                    #expect(expected.answered && frame.requestID == expected.id)
                    let front = replies.front
                    #expect(replies.removeFirst().id == expected.id)
                    if replies.front < front, replies.count > 0 { compactions += 1 }
                    firstNumber += 1
                }
            }
            #expect(replies.count == model.count && replies.firstNumber == firstNumber)
            #expect(replies.nextNumber == firstNumber + UInt64(model.count))
        }
        #expect(compactions > 0, "the front moved far enough ahead to be compacted")
    }
}
