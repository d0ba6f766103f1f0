import Testing

@testable import LoadGenerator

@Suite struct RecorderTests {
    @Test func correctedCountsFromTheIntendedStartAndUncorrectedFromTheActualOne() {
        let recorder = LoadRecorder(steps: ["a", "b"], stages: ["1s:10", "1s:20"], intervalLength: 1)
        recorder.recordArrival(stage: 0)
        recorder.recordArrival(stage: 1)
        recorder.recordArrival(stage: 1)
        // Meant to start at 0.1 s, began at 0.5 s (its device was busy), finished at 0.6 s.
        recorder.recordSuccess(
            stage: 0, intended: .milliseconds(100), started: .milliseconds(500), finished: .milliseconds(600),
            steps: [StepTiming("a", .milliseconds(30)), StepTiming("b", .milliseconds(70))])
        recorder.recordFailure(stage: 1, kind: "timeout", at: .milliseconds(1500))
        recorder.recordDrop(stage: 1, at: .milliseconds(2500))
        recorder.finish(at: .milliseconds(2700))

        let totals = recorder.totals
        #expect(totals.arrivals == 3 && totals.completed == 1 && totals.dropped == 1 && totals.errors == ["timeout": 1])
        // Three significant digits: within 0.1%.
        func near(_ value: Double, _ expected: Double) -> Bool { abs(value - expected) <= expected / 1000 }
        #expect(near(LatencyStats(totals.corrected).max, 500))
        #expect(near(LatencyStats(totals.uncorrected).max, 100))
        #expect(near(LatencyStats(totals.steps["a"]!).p50, 30))
        #expect(near(LatencyStats(totals.steps["b"]!).p50, 70))

        let stages = recorder.stages
        #expect(stages.map(\.completed) == [1, 0])
        #expect(stages.map(\.errors) == [0, 1])
        #expect(stages.map(\.dropped) == [0, 1])
        #expect(stages.map(\.arrivals) == [1, 2])

        // Intervals by completion time: [0,1) one success, [1,2) one error, [2,2.7) one drop.
        let intervals = recorder.intervals
        #expect(intervals.map(\.start) == [0, 1, 2])
        #expect(intervals.map(\.completed) == [1, 0, 0])
        #expect(intervals.map(\.errors) == [0, 1, 0])
        #expect(intervals.map(\.dropped) == [0, 0, 1])
        #expect(abs(intervals[2].length - 0.7) < 1e-9)
        #expect(near(intervals[0].corrected.max, 500) && near(intervals[0].uncorrected.max, 100))
    }
}
