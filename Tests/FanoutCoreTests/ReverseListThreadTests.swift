@testable import FanoutCore
import FanoutTestSupport
import Testing

/// Replay's second thread for the topic index's reverse lists: it makes the entries it is handed
/// in order, on lists it holds between `begin` and `end`, and refuses a list past 65535 ids.
@Suite("Reverse-list thread")
struct ReverseListThreadTests {
    /// Random jobs (ids added to slots that lack them), handed over in rounds of `begin`/`end` with
    /// changes in between: the lists come back as the same appends made on this thread.
    @Test(arguments: [5, 6] as [UInt64])
    func entriesAreMadeAsOnTheCallingThread(seed: UInt64) throws {
        var random = SeededRandomNumberGenerator(seed: seed)
        let thread = ReverseListThread(capacity: 4)
        defer { thread.stop() }
        var lists = SlotTopicLists()
        var model: [UInt32: Set<UInt32>] = [:]
        var lsn: UInt64 = 0
        for round in 0..<6 {
            thread.begin(lists)
            for _ in 0..<200 {
                let id = UInt32.random(in: 0..<50, using: &random)
                let slots = (0..<Int.random(in: 0..<40, using: &random)).map { _ in UInt32.random(in: 0..<3000, using: &random) }
                let added = Array(Set(slots.filter { !model[$0, default: []].contains(id) }))
                for slot in added { model[slot, default: []].insert(id) }
                try thread.append(id, to: added, lsn: lsn)
                lsn += 1
            }
            lists = try thread.end()
            // Between hand-overs the caller changes the lists itself.
            let slot = UInt32(round * 7)
            #expect(Set(lists.removeAll(of: slot)) == model[slot, default: []])
            model[slot] = []
        }
        for slot in 0..<UInt32(3001) {
            #expect(Set(lists.ids(of: slot)) == model[slot, default: []], "slot \(slot)")
        }
    }

    /// A slot whose list holds 65535 ids takes no more: `end` names the record and the slot, and
    /// later appends throw too.
    @Test func aFullListIsRefused() throws {
        var lists = SlotTopicLists()
        for id in 0..<UInt32(UInt16.max) { lists.append(id, to: 9) }
        let thread = ReverseListThread()
        defer { thread.stop() }
        thread.begin(lists)
        try thread.append(70_000, to: [3, 9, 4], lsn: 41)
        let error = #expect(throws: FanoutError.self) { try thread.end() }
        #expect(error?.code == .internal)
        #expect(error?.message.contains("LSN 41") == true, "\(String(describing: error))")
        #expect(error?.message.contains("slot 9") == true, "\(String(describing: error))")
        #expect(throws: FanoutError.self) { try thread.append(70_001, to: [5], lsn: 42) }
    }
}
