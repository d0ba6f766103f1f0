import Testing

@testable import LoadGenerator

@Suite struct ThresholdTests {
    let steps = SigningCeremonyWorkload.stepNames

    func stats(p99: Double, count: UInt64 = 100) -> LatencyStats {
        var stats = LatencyStats(makeLatencyHistogram())
        stats.count = count
        stats.p99 = p99
        stats.max = p99 * 2
        return stats
    }

    @Test func parsesTheIssueExamples() throws {
        let p99 = try Threshold.parse("syncAck.p99 < 200ms", steps: steps)
        #expect(p99.metric == .latency(histogram: "syncAck", statistic: "p99"))
        #expect(p99.comparison == .less)
        #expect(p99.limit == 200)
        #expect(!p99.abortOnFail)

        let errors = try Threshold.parse("errors.rate < 0.1%", steps: steps)
        #expect(errors.metric == .errorRate)
        #expect(abs(errors.limit - 0.001) < 1e-12)

        let throughput = try Threshold.parse("throughput>100/s abortOnFail", steps: steps)
        #expect(throughput.metric == .throughput)
        #expect(throughput.comparison == .greater)
        #expect(throughput.limit == 100)
        #expect(throughput.abortOnFail)

        let corrected = try Threshold.parse("latency.p99.9 <= 1.5s", steps: steps)
        #expect(corrected.metric == .latency(histogram: "latency", statistic: "p99.9"))
        #expect(corrected.comparison == .lessOrEqual)
        #expect(corrected.limit == 1500)
        #expect(try Threshold.parse("uncorrected.max >= 800us", steps: steps).limit == 0.8)
        #expect(try Threshold.parse("dropped.rate < 0.01", steps: steps).limit == 0.01)
    }

    @Test(arguments: [
        ("syncAck.p99 200ms", "has no comparison"),
        ("fetch.p99 < 200ms", "unknown metric \"fetch.p99\""),
        ("syncAck.p42 < 200ms", "unknown statistic \"p42\""),
        ("syncAck.p99 < fast", "\"fast\" is not a duration"),
        ("errors.rate < 5", "more than 1"),
        ("errors.rate < lots%", "not a percentage"),
        ("throughput > 100/s now", "expected one value"),
        ("throughput >", "expected one value"),
    ])
    func parseErrorsSayWhatIsWrong(text: String, message: String) {
        #expect {
            try Threshold.parse(text, steps: steps)
        } throws: { error in
            (error as? ThresholdError)?.message.contains(message) == true
        }
    }

    @Test func evaluatesAgainstTheFigures() throws {
        let figures = LoadFigures(
            arrivals: 1000, completed: 990, errors: 10, dropped: 5, seconds: 10,
            latency: ["syncAck": stats(p99: 150), "latency": stats(p99: 400), "uncorrected": stats(p99: 90)])
        func check(_ text: String) throws -> ThresholdResult { try Threshold.parse(text, steps: steps).evaluate(figures) }
        #expect(try check("syncAck.p99 < 200ms").passed)
        #expect(try check("syncAck.p99 < 200ms").actual == 150)
        #expect(try !check("syncAck.p99 < 150ms").passed)
        #expect(try check("syncAck.p99 <= 150ms").passed)
        #expect(try !check("latency.p99 < 200ms").passed)
        #expect(try check("uncorrected.p99 < 200ms").passed)
        #expect(try check("errors.rate < 1.1%").passed)  // 10 of 1000 finished
        #expect(try !check("errors.rate < 0.1%").passed)
        #expect(try check("errors.count <= 10").passed)
        #expect(try check("dropped.rate <= 0.5%").passed)
        #expect(try !check("dropped.count < 5").passed)
        #expect(try check("throughput > 98/s").passed)  // 990 in 10 s
        #expect(try !check("throughput > 100/s").passed)
        // A metric without samples fails rather than passing vacuously.
        let missing = try check("capture.p99 < 1s")
        #expect(!missing.passed && missing.actual == nil)
    }
}
