@testable import FanoutCore
import Testing

/// The WAL writer's shared state on its own: its transitions without a thread or a file.
@Suite("WAL writer state")
struct WALWriterStateTests {
    static func records(_ count: Int) -> [WALRecord] {
        (0..<count).map { _ in .createProject(.default) }
    }

    @Test func appendedRecordsAreAcknowledgedInOrder() throws {
        var state = WALWriterState(nextLSN: 10)
        let first = try state.append(Self.records(2))
        let second = try state.append(Self.records(3))
        #expect(first == LogTicket(lsn: 12, epoch: 0) && second == LogTicket(lsn: 15, epoch: 0))
        #expect(state.hasWork)
        let work = state.takeWork()
        #expect(work.count == 5 && work.appends.map(\.count) == [2, 3] && work.firstLSN == 10 && !work.closing && !work.roll)
        #expect(!state.hasWork)
        #expect(state.outcome(of: first) == nil)
        _ = state.acknowledge(through: 12, count: 2, bytes: 100, synced: true)
        #expect(state.outcome(of: first) == true)
        #expect(state.outcome(of: second) == nil, "only what the batch covered")
        #expect(state.statistics.records == 2 && state.statistics.syncs == 1)
    }

    /// A failure refuses what was not acknowledged, says nothing until it settles, and a refused
    /// LSN given out again in the next epoch is never taken for the refused one.
    @Test func aFailureRefusesWhatWasNotAcknowledged() throws {
        var state = WALWriterState(nextLSN: 0)
        let kept = try state.append(Self.records(1))
        _ = state.takeWork()
        _ = state.acknowledge(through: 1, count: 1, bytes: 10, synced: true)
        let refused = try state.append(Self.records(2))
        #expect(state.fail(FanoutError(.unavailable, "disk full")) == 1)
        #expect(state.outcome(of: refused) == nil, "nobody hears an outcome while the handler runs")
        #expect(throws: FanoutError.self) { try state.append(Self.records(1)) }
        _ = state.settle()
        #expect(state.outcome(of: refused) == false)
        #expect(state.outcome(of: kept) == true)
        #expect(state.nextTicket == LogTicket(lsn: 1, epoch: 1), "the refused LSNs are given out again, in a new epoch")
        state.recovered()
        let again = try state.append(Self.records(2))
        _ = state.takeWork()
        _ = state.acknowledge(through: 3, count: 2, bytes: 20, synced: true)
        #expect(again == LogTicket(lsn: 3, epoch: 1) && state.outcome(of: again) == true)
        #expect(state.outcome(of: refused) == false, "the same LSN in the old epoch stays refused")
    }

    @Test func notifiedWaitersAreToldByTheBatchThatCoversThem() async throws {
        var state = WALWriterState(nextLSN: 0)
        let ticket = try state.append(Self.records(3))
        let outcome = await withCheckedContinuation { (continuation: CheckedContinuation<FanoutError?, Never>) in
            state.addWaiter((ticket.lsn, { continuation.resume(returning: $0) }))
            _ = state.takeWork()
            #expect(state.acknowledge(through: 2, count: 2, bytes: 1, synced: true).notifications.isEmpty)
            let wakeups = state.acknowledge(through: 3, count: 1, bytes: 1, synced: true)
            #expect(wakeups.notifications.count == 1)
            wakeups.notify()
        }
        #expect(outcome == nil)
    }

    @Test func closingAndRollingAreWork() {
        var state = WALWriterState(nextLSN: 0)
        #expect(!state.hasWork)
        #expect(state.requestRoll() == 1)
        #expect(state.takeWork().roll)
        #expect(!state.hasWork)
        state.startClosing()
        #expect(state.hasWork && state.takeWork().closing)
        #expect(state.refusalNow != nil)
    }
}
