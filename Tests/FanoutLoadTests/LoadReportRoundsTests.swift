@testable import FanoutLoad
import Testing

/// `compare --rounds N`: the rounds' reports combined into one, with each figure's medians.
@Suite struct LoadReportRoundsTests {
    /// A round's report with one subscribe phase per system and the given comparisons
    /// (figure, fanout, redis, whether larger is better).
    private func round(_ figures: [(String, Double, Double, Bool)], first: String = "redis") -> LoadReport {
        var report = LoadReport(workload: LoadWorkload(seed: 1, installations: 10, topics: 1), durability: "always", options: LoadOptions())
        report.firstSystems = [first]
        var recorder = PhaseRecorder()
        recorder.record(.milliseconds(1), items: 10)
        report.phases = ["redis", "fanout"].map { system in
            PhaseResult(system: system, phase: "subscribe", itemName: "subscriptions", recorder: recorder, elapsed: .seconds(1), cpuSeconds: nil, residentBytes: nil)
        }
        report.comparisons = figures.map { figure, fanout, redis, larger in
            LoadReport.Comparison(figure: figure, fanout: fanout, redis: redis, ratio: fanout / redis, largerIsBetter: larger)
        }
        return report
    }

    @Test func eachFigureIsTheMedianOfItsRoundsAndTheRatioTheMedianOfTheRoundsRatios() throws {
        let report = try #require(LoadReport(rounds: [
            self.round([("subscribe subscriptions/s", 100, 50, true), ("subscribe p50 ms", 4, 2, false)]),
            self.round([("subscribe subscriptions/s", 300, 100, true), ("subscribe p50 ms", 3, 2, false)], first: "fanout"),
            self.round([("subscribe subscriptions/s", 264, 120, true), ("subscribe p50 ms", 1, 2, false)]),
        ]))
        #expect(report.rounds.map(\.figure) == ["subscribe subscriptions/s", "subscribe p50 ms"])
        let rate = try #require(report.rounds.first)
        #expect(rate.ratios == [2.0, 3.0, 2.2], "each round's own ratio, in the order the rounds ran")
        #expect(rate.ratio == 2.2, "the median of the rounds' ratios, not their mean (2.4) nor the medians' ratio (2.64)")
        #expect(rate.fanout == 264 && rate.redis == 100)
        #expect(rate.largerIsBetter)
        let latency = report.rounds[1]
        #expect(latency.ratio == 1.5 && latency.fanout == 3 && latency.redis == 2 && !latency.largerIsBetter)

        // Every round's phases and comparisons are kept, each with its round.
        #expect(report.phases.map(\.round) == [1, 1, 2, 2, 3, 3])
        #expect(report.comparisons.map(\.round) == [1, 1, 2, 2, 3, 3])
        let table = report.table
        #expect(table.contains("subscribe (round 3)"))
        #expect(table.contains("over 3 rounds"))
        #expect(table.contains("2.00 3.00 2.20"), "the table lists each round's ratio")
        #expect(report.firstSystems == ["redis", "fanout", "redis"])
        #expect(table.contains("first: redis, fanout, redis (the system that ran its phases first, each round)"))
    }

    @Test func anEvenNumberOfRoundsTakesTheMeanOfTheMiddleTwo() throws {
        let report = try #require(LoadReport(rounds: [
            self.round([("register registrations/s", 90, 100, true)]),
            self.round([("register registrations/s", 110, 100, true)]),
        ]))
        #expect(report.rounds.count == 1)
        #expect(abs(report.rounds[0].ratio - 1.0) < 1e-9)
        #expect(report.rounds[0].fanout == 100)
    }

    @Test func aFigureSomeRoundLacksIsLeftOutOfTheMedians() throws {
        let report = try #require(LoadReport(rounds: [
            self.round([("register registrations/s", 90, 100, true), ("latency read p50 ms", 0.1, 0.08, false)]),
            self.round([("register registrations/s", 110, 100, true)]),
        ]))
        #expect(report.rounds.map(\.figure) == ["register registrations/s"])
    }

    @Test func oneRoundIsReportedAsItIs() throws {
        let single = self.round([("register registrations/s", 90, 100, true)])
        let report = try #require(LoadReport(rounds: [single]))
        #expect(report.rounds.isEmpty)
        #expect(report.phases.allSatisfy { $0.round == nil })
        #expect(report.table == single.table)
        #expect(LoadReport(rounds: []) == nil, "no round, no report")
    }
}
