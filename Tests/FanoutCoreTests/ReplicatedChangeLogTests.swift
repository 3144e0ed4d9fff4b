@testable import FanoutCore
import FanoutTestSupport
import Foundation
import Synchronization
import Testing

/// `ReplicatedChangeLog`: a change is acknowledged only once the local log and the replica both
/// hold it. The replica here is a gate the test opens and closes (fault injection: the real one,
/// JetStream, is in FanoutClusterTests).
@Suite struct ReplicatedChangeLogTests {
    /// A replica that holds each call until the test lets it through, or answers with an error.
    final class Gate: Sendable {
        private let calls = Mutex<[(records: Int, through: UInt64)]>([])
        private let answers = Mutex<[FanoutError?]>([])
        private let entered = DispatchSemaphore(value: 0)
        private let released = DispatchSemaphore(value: 0)

        /// What `replicate` was called with, in order.
        var received: [(records: Int, through: UInt64)] { self.calls.withLock { $0 } }

        func replicate(_ records: [WALRecord], _ through: UInt64) throws(FanoutError) {
            self.calls.withLock { $0.append((records.count, through)) }
            self.entered.signal()
            self.released.wait()
            if let error = self.answers.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) { throw error }
        }

        /// Whether a call enters `replicate` within `milliseconds` (it is then let through by the
        /// next `pass`).
        func entersWithin(milliseconds: Int) -> Bool {
            guard self.entered.wait(timeout: .now() + .milliseconds(milliseconds)) == .success else { return false }
            self.entered.signal()
            return true
        }

        /// Waits until a call is inside `replicate`, then lets it return (with `error`, if given).
        func pass(_ error: FanoutError? = nil) {
            self.entered.wait()
            self.answers.withLock { $0.append(error) }
            self.released.signal()
        }
    }

    private static func request(_ token: String) -> RegistrationRequest {
        RegistrationRequest(token: RegistrationToken(token)!, platform: .android, appID: AppID("1:1:android:a")!)
    }

    @Test func aChangeIsAcknowledgedOnlyOnceBothHoldIt() throws {
        let local = InMemoryChangeLog(acknowledgement: .manual)
        let gate = Gate()
        let log = ReplicatedChangeLog(local: local) { records, through throws(FanoutError) in try gate.replicate(records, through) }
        let engine = Engine(log: log)
        let answered = Mutex<Result<RegistrationResult, FanoutError>?>(nil)
        let answer = DispatchSemaphore(value: 0)
        engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in try changes.register(Self.request("first")) }.whenDurable { result in
            answered.withLock { $0 = result }
            answer.signal()
        }

        // Not handed to the replica while the local log has not made it durable: a replica must
        // never hold what a crash could take from the local log. (A wait for something that must
        // not happen: it can miss a wrong call, never fail a right one.)
        try #require(!gate.entersWithin(milliseconds: 200), "replicated before the local log acknowledged it")
        #expect(gate.received.isEmpty)
        local.acknowledge(through: 1)
        #expect(answered.withLock { $0 } == nil, "the local log holds it, the replica not yet")
        gate.pass()
        answer.wait()
        #expect(try answered.withLock { $0 }?.get().installation.token?.value == "first")

        // Two appends made durable together leave in one call, in LSN order.
        let second = engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in try changes.register(Self.request("second")) }
        let third = engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in try changes.register(Self.request("third")) }
        local.acknowledge(through: 3)
        #expect(log.acknowledgedTicket.lsn == 1, "local holds them, the replica does not yet")
        gate.pass()
        _ = try second.blockingUntilDurable()
        _ = try third.blockingUntilDurable()
        #expect(log.acknowledgedTicket.lsn == 3)
        #expect(gate.received.map(\.through) == [1, 3])
        #expect(gate.received.map(\.records) == [1, 2])
        try engine.close()
    }

    @Test func anUnavailableReplicaIsRetriedWithTheSameRecords() throws {
        let gate = Gate()
        let log = ReplicatedChangeLog(local: InMemoryChangeLog(), retryInterval: .milliseconds(1)) { records, through throws(FanoutError) in
            try gate.replicate(records, through)
        }
        let engine = Engine(log: log)
        // One append (one registration), so that every call is for the same records.
        let applied = engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in try changes.register(Self.request("a")) }
        gate.pass(FanoutError(.unavailable, "no NATS"))
        gate.pass(FanoutError(.unavailable, "no NATS"))
        #expect(log.acknowledgedTicket.lsn == 0)
        gate.pass()
        _ = try applied.blockingUntilDurable()
        let calls = gate.received
        #expect(calls.count == 3 && calls.allSatisfy { $0.through == 1 && $0.records == 1 })
        try engine.close()
    }

    @Test func aDeposedOwnersLogFailsAndRefusesChanges() throws {
        let gate = Gate()
        let log = ReplicatedChangeLog(local: InMemoryChangeLog()) { records, through throws(FanoutError) in try gate.replicate(records, through) }
        let engine = Engine(log: log)
        let applied = engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in try changes.register(Self.request("a")) }
        gate.pass(FanoutError(.failedPrecondition, "another publisher appended"))
        #expect(throws: FanoutError(.unavailable, "")) { try applied.blockingUntilDurable() }
        #expect(log.currentFailure?.code == .unavailable)
        let refused = engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in try changes.register(Self.request("b")) }
        #expect(throws: FanoutError(.unavailable, "")) { try refused.blockingUntilDurable() }
        #expect(gate.received.count == 1, "nothing more was replicated")
    }

    /// An owner's engine opened on its data directory: the records past what the replica holds
    /// are replicated first; a replica ahead of the log, or records a snapshot replaced, refuse it.
    @Test func anEngineOnADirectoryReplicatesItsUnreplicatedTailFirst() async throws {
        try await TemporaryDirectory.with { directory in
            let engine = try Engine(directory: directory)
            for token in ["a", "b", "c"] { _ = try await engine.register(Self.request(token)) }
            let snapshot = try engine.snapshot()
            _ = try await engine.register(Self.request("d"))
            try engine.close()
            let name = URL(fileURLWithPath: snapshot).lastPathComponent
            let snapshotLSN = try #require(UInt64(name.dropFirst("snapshot-".count).prefix(16), radix: 16))

            let calls = Mutex<[(records: [WALRecord], through: UInt64)]>([])
            let replication = Engine.Replication(replicatedThrough: snapshotLSN) { records, through throws(FanoutError) in
                calls.withLock { $0.append((records, through)) }
            }
            let owner = try Engine(directory: directory, replication: replication)
            _ = try await owner.register(Self.request("e"))
            try owner.close()
            let received = calls.withLock { $0 }
            // The tail (d), then the new change (e): in one call or two, as the thread took them.
            #expect(received.last?.through == snapshotLSN + 2)
            let tokens = received.flatMap(\.records).map { record -> String? in
                guard case .register(_, let installation) = record else { return nil }
                return installation.token?.value
            }
            #expect(tokens == ["d", "e"])

            #expect(throws: FanoutError(.failedPrecondition, "")) {
                try Engine(directory: directory, replication: Engine.Replication(replicatedThrough: snapshotLSN + 3) { _, _ throws(FanoutError) in })
            }
            #expect(throws: FanoutError(.failedPrecondition, "")) {
                try Engine(directory: directory, replication: Engine.Replication(replicatedThrough: snapshotLSN - 1) { _, _ throws(FanoutError) in })
            }
        }
    }

    /// A shard owner's snapshot covers only what its replica holds: with the replica unreachable it
    /// is refused, so the records the replica lacks stay in the log to be published at the next
    /// start; once the replica holds them, the snapshot is written.
    @Test func anOwnersSnapshotWaitsForItsReplica() async throws {
        try await TemporaryDirectory.with { directory in
            let reachable = Atomic<Bool>(false)
            let replication = Engine.Replication(replicatedThrough: 0, retryInterval: .milliseconds(5)) { _, _ throws(FanoutError) in
                guard reachable.load(ordering: .relaxed) else { throw FanoutError(.unavailable, "no NATS") }
            }
            let owner = try Engine(directory: directory, replication: replication)
            let applied = owner.apply { (changes: inout Engine.Changes) throws(FanoutError) in try changes.register(Self.request("a")) }
            #expect(throws: FanoutError(.unavailable, "")) { try owner.snapshot(waitingForTheReplicaAtMost: .milliseconds(100)) }
            reachable.store(true, ordering: .relaxed)
            _ = try applied.blockingUntilDurable()
            let snapshot = try owner.snapshot(waitingForTheReplicaAtMost: .seconds(30))
            #expect(snapshot.hasSuffix(".lz4"))
            try owner.close()
        }
    }
}
