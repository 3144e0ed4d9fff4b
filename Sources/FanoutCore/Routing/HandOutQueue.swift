internal import DequeModule
import Synchronization

/// Deliveries a state transition gave to one consumer, in order: an effect the engine performs
/// (pushes into the consumer's sink, in one go) once the sends that made them are as durable as
/// the engine's durability says (and every change logged before them).
///
/// A fill gathers each delivery's plain fields (`HandedOut`, nothing to retain); the change
/// builds the `Delivery` array once, in place (`build()`). Appending each `Delivery` as it was
/// handed out copied it whole through its value witness and destroyed the original (3.7% of the
/// server's samples while consumers drained a topic send).
struct HandOut {
    /// The consumer's id, and where its deliveries go.
    let consumer: UInt64
    let sink: DeliverySink
    /// What its deliveries hold: their messages and their tokens' chunks.
    let references: DeliveryReferences
    /// The deliveries handed out, as plain fields, until `build()`.
    var handedOut: [HandedOut] = []
    /// The APNs tokens of iOS deliveries that carry one (`HandedOut.apnsToken` indexes them).
    var apnsTokens: [APNsDeviceToken] = []
    /// The deliveries, once built.
    private(set) var deliveries: [Delivery] = []

    init(consumer: UInt64, sink: DeliverySink, references: DeliveryReferences, capacity: Int) {
        self.consumer = consumer
        self.sink = sink
        self.references = references
        self.handedOut.reserveCapacity(capacity)
    }

    /// Builds `deliveries` from what was handed out, each initialized in place.
    mutating func build() {
        let references = self.references
        self.deliveries = self.handedOut.withUnsafeBufferPointer { handedOut in
            [Delivery](unsafeUninitializedCapacity: handedOut.count) { buffer, initialized in
                for (position, fields) in handedOut.enumerated() {
                    let apnsToken = fields.apnsToken == HandedOut.noAPNsToken ? nil : self.apnsTokens[Int(fields.apnsToken)]
                    Delivery.initialize(buffer.baseAddress! + position, fields, apnsToken: apnsToken, references: references)
                    initialized = position + 1
                }
            }
        }
        self.handedOut = []
        self.apnsTokens = []
    }
}

/// A delivery's fields as a fill hands it out, before its `Delivery` is built: all plain values.
struct HandedOut: @unchecked Sendable {
    // Sendable: `tokenEntry` points into a chunk the hand-out's references keep alive, whose bytes
    // never change (as `Delivery`'s).
    static let noAPNsToken = UInt32.max

    var id: DeliveryID
    var fid: FID
    var tokenEntry: UnsafeRawPointer?
    var platform: Platform
    var expiry: Timestamp
    var messageIndex: UInt32
    /// The index of its APNs token in the hand-out's `apnsTokens`, or `noAPNsToken`.
    var apnsToken: UInt32
}

/// The hand-outs waiting for the log: a delivery never reaches a consumer before the send that
/// made it (and every change logged before it) is acknowledged, so a crash cannot lose a send
/// whose deliveries a worker already pushed.
///
/// Hand-outs are queued under the project lock that made them, each with the log position it
/// waits for, so one consumer gets them in the order they were made. `release(through:)` pushes
/// the acknowledged ones (the log's writer calls it after each batch, a caller after queueing);
/// it pushes under the queue's own lock, never a project's, so two releases keep that order.
final class HandOutQueue: Sendable {
    private struct Waiting {
        var ticket: LogTicket
        var handOuts: [HandOut]
    }

    private let waiting = Locked(Deque<Waiting>())
    /// How many entries `waiting` holds: lets `release` skip the lock when nothing waits (the
    /// common case for every change that hands nothing out).
    private let count = Atomic<Int>(0)

    /// Queues hand-outs that wait for every record before `ticket`. Call under the project lock.
    func enqueue(_ handOuts: [HandOut], after ticket: LogTicket) {
        self.waiting.withLock { waiting in
            waiting.append(Waiting(ticket: ticket, handOuts: handOuts))
            self.count.store(waiting.count, ordering: .releasing)
        }
    }

    /// Pushes, in order, the hand-outs whose records are acknowledged by `acknowledged()`; drops
    /// those of an earlier epoch (their records were refused, and their consumers were detached).
    func release(through acknowledged: @autoclosure () -> LogTicket) {
        guard self.count.load(ordering: .acquiring) > 0 else { return }
        let acknowledged = acknowledged()
        self.waiting.withLock { waiting in
            defer { self.count.store(waiting.count, ordering: .releasing) }
            while let first = waiting.first {
                if first.ticket.epoch == acknowledged.epoch {
                    guard first.ticket.lsn <= acknowledged.lsn else { return }
                    for handOut in first.handOuts { handOut.sink.push(contentsOf: handOut.deliveries) }
                } else if first.ticket.epoch > acknowledged.epoch {
                    return
                }
                waiting.removeFirst()
            }
        }
    }

    /// Drops every waiting hand-out (after a log failure: their changes were refused or rebuilt).
    func removeAll() {
        self.waiting.withLock { waiting in
            waiting.removeAll()
            self.count.store(0, ordering: .releasing)
        }
    }
}
