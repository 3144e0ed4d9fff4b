import FanoutCore
import FanoutWire

/// A reply a connection holds until it may leave, in the order its request was applied.
enum WaitingReply {
    /// Changes the engine applied, answered from their result once the log has them.
    case logged(Engine.Applied<ServerMessage>)
    /// A reply another thread answers (a cluster's shards, a snapshot): nil until it has.
    case answeredElsewhere(ServerFrame?)
}

/// A connection's waiting replies, each with its request's exchange, numbered in the order the
/// requests were applied; they leave from the front. Arrays with a moving front, not a `Deque`:
/// `Deque.append` copies what it is given (its parameter is borrowed), and a reply holding a
/// registration is a dozen references to retain and release. A reply is taken out to be looked
/// at, and put back if it must wait.
struct WaitingReplies {
    private var replies: [WaitingReply?] = []
    private var exchanges: [Exchange] = []
    /// Where the first waiting reply is in the arrays (what left before it is compacted away later).
    private(set) var front = 0
    /// The number of the first waiting reply (the connection's replies are numbered from 0).
    private(set) var firstNumber: UInt64 = 0

    var count: Int { self.replies.count - self.front }

    /// The number the next appended reply gets.
    var nextNumber: UInt64 { self.firstNumber + UInt64(self.count) }

    mutating func append(_ reply: consuming WaitingReply, answering exchange: Exchange) {
        self.replies.append(reply)
        self.exchanges.append(exchange)
    }

    /// Gives the reply numbered `number`, answered elsewhere, its frame.
    mutating func answer(_ number: UInt64, with frame: consuming ServerFrame) {
        let position = self.front + Int(number - self.firstNumber)
        guard case .answeredElsewhere(nil)? = self.replies[position] else { return }
        self.replies[position] = .answeredElsewhere(frame)
    }

    /// The first reply, taken out (nil when none waits): put it back (`putBackFirst`) or let it
    /// leave (`removeFirst`).
    mutating func takeFirst() -> WaitingReply? {
        guard self.front < self.replies.count else { return nil }
        return self.replies[self.front].take()
    }

    /// Puts back the first reply, which `takeFirst` took and which must wait.
    mutating func putBackFirst(_ reply: consuming WaitingReply) {
        self.replies[self.front] = reply
    }

    /// The first reply, taken by `takeFirst`, leaves: its request's exchange.
    mutating func removeFirst() -> Exchange {
        let exchange = self.exchanges[self.front]
        self.front += 1
        self.firstNumber += 1
        if self.front == self.replies.count {
            self.replies.removeAll(keepingCapacity: true)
            self.exchanges.removeAll(keepingCapacity: true)
            self.front = 0
        } else if self.front >= 1024, self.front * 2 >= self.replies.count {
            self.replies.removeFirst(self.front)
            self.exchanges.removeFirst(self.front)
            self.front = 0
        }
        return exchange
    }
}
