import Foundation
import Testing
import Thresholds

@testable import Fleet

/// A scenario's `checks`: thresholds parsed with the shared grammar against the summary's
/// metrics, evaluated on a finished run's summary, and the exit code they lead to.
@Suite struct FleetThresholdTests {
    static func summary(verdict: CheckVerdict = .valid, synced: Int = 40, pending: Int = 0, p99: Double? = 0.25) -> RunSummary {
        var counts = RunSummary.Counts()
        counts.composed = 45
        counts.signed = 42
        counts.synced = synced
        counts.pending = pending
        return RunSummary(
            scenario: "t", seed: 7, replay: "signfleet fleet run t --seed 7", runDirectory: "runs/x", startedAt: 0,
            durations: .init(run: 20, drain: 3, total: 25), devices: 4, nodeProcesses: 2, counts: counts,
            signedPerSecond: 2.1, syncedPerSecond: 2, syncAck: .init(samples: p99 == nil ? 0 : 40, p50: p99.map { $0 / 5 }, p99: p99, max: p99),
            faults: [AppliedFault(kind: "kill node", targets: ["node-a-1"], start: 2, end: 4)], restarts: [:], totalRestarts: 0,
            exhausted: [], drained: 2, interrupted: false, verdict: verdict, anomalies: verdict == .invalid ? 3 : 0, notes: [],
            anomalyKinds: verdict == .invalid ? ["lost": 1, "order-violation": 2] : [:])
    }

    @Test func parsesTheBriefsExamplesInTheSummarysUnits() throws {
        let p99 = try FleetThreshold.parse("syncAck.p99 < 1s")
        #expect(p99.metric.name == "syncAck.p99" && p99.metric.unit == .seconds)
        #expect(p99.comparison == .less && p99.limit == 1)
        #expect(try FleetThreshold.parse("syncAck.p50 <= 200ms").limit == 0.2)
        #expect(try FleetThreshold.parse("syncAck.max < 800us").limit == 0.0008)
        // A bare number is milliseconds, as in `signfleet load`.
        #expect(try FleetThreshold.parse("syncAck.p99 < 250").limit == 0.25)
        let lost = try FleetThreshold.parse("  lost == 0 ")
        #expect(lost.source == "lost == 0" && lost.comparison == .equal && lost.limit == 0 && lost.metric.unit == .count)
        #expect(try FleetThreshold.parse("synced >= 100").comparison == .greaterOrEqual)
        #expect(try FleetThreshold.parse("anomalies!=1").comparison == .notEqual)
        #expect(try FleetThreshold.parse("syncedPerSecond > 1.5/s").limit == 1.5)
        #expect(try FleetThreshold.parse("orderViolation == 0").metric.name == "orderViolation")
    }

    @Test func everyMetricNameIsKnownOnceAndReadsTheSummary() throws {
        let names = FleetMetric.all.map(\.name)
        #expect(Set(names).count == names.count)
        for kind in CheckAnomaly.Kind.allCases { #expect(names.contains("\(kind)")) }
        let summary = Self.summary(verdict: .invalid)
        #expect(FleetMetric.named("synced")?.value(in: summary) == 40)
        #expect(FleetMetric.named("lost")?.value(in: summary) == 1)
        #expect(FleetMetric.named("orderViolation")?.value(in: summary) == 2)
        #expect(FleetMetric.named("duplicate")?.value(in: summary) == 0)
        #expect(FleetMetric.named("faults")?.value(in: summary) == 1)
        #expect(FleetMetric.named("durations.drain")?.value(in: summary) == 3)
        #expect(FleetMetric.named("syncAck.samples")?.value(in: summary) == 40)
    }

    @Test(arguments: [
        ("synced.p99 < 1s", "unknown metric \"synced.p99\"; known: composed, signed, synced"),
        ("syncAck.p95 < 1s", "(did you mean `syncAck.p99`?)"),
        ("pending = 0", "unknown comparison"),
        ("pending", "has no comparison"),
        ("pending == 0.5%", "\"0.5%\" is not a count"),
        ("syncAck.p99 < quick", "\"quick\" is not a duration"),
        ("lost == 0 abortOnFail", "abortOnFail is for signfleet load"),
    ])
    func badThresholdsSayWhatIsWrong(text: String, message: String) {
        #expect {
            try FleetThreshold.parse(text)
        } throws: { error in
            (error as? ThresholdError)?.message.contains(message) == true
        }
    }

    @Test func evaluationPassesAndFailsAgainstTheSummary() throws {
        let summary = Self.summary(pending: 2)
        func check(_ text: String) throws -> ThresholdResult { try FleetThreshold.parse(text).evaluate(summary) }
        #expect(try check("lost == 0").passed)
        #expect(try check("lost == 0").actual == 0)
        #expect(try !check("pending == 0").passed)
        #expect(try check("pending == 0").actual == 2)
        #expect(try check("syncAck.p99 < 1s").passed)
        #expect(try check("syncAck.p99 < 1s").actual == 0.25)
        #expect(try !check("syncAck.p99 < 250ms").passed)
        #expect(try check("syncAck.p99 <= 250ms").passed)
        #expect(try check("syncAck.p50 <= 50ms").passed)
        #expect(try check("synced >= 40").passed)
        #expect(try !check("synced > 40").passed)
        #expect(try !check("synced < 0").passed)
        #expect(try check("syncedPerSecond >= 2/s").passed)
        // No sync measured: a latency threshold fails rather than passing vacuously.
        let unmeasured = try FleetThreshold.parse("syncAck.p99 < 1s").evaluate(Self.summary(p99: nil))
        #expect(!unmeasured.passed && unmeasured.actual == nil)
    }

    @Test func checksAreAppliedToTheSummary() {
        var summary = Self.summary(pending: 1)
        RunChecks.apply(Checks(verdict: .valid, thresholds: ["lost == 0", "pending == 0"]), to: &summary)
        #expect(summary.thresholds == [
            ThresholdResult(threshold: "lost == 0", actual: 0, passed: true),
            ThresholdResult(threshold: "pending == 0", actual: 1, passed: false),
        ])
        #expect(!summary.checksPassed)
        #expect(RunChecks.exitCode(summary) == RunChecks.checksFailedExitCode)
        #expect(RunChecks.lines(summary) == ["threshold PASS  lost == 0  (actual 0)", "threshold FAIL  pending == 0  (actual 1)"])

        var expectedInvalid = Self.summary(verdict: .invalid)
        RunChecks.apply(Checks(verdict: .invalid, thresholds: ["lost >= 1"]), to: &expectedInvalid)
        #expect(expectedInvalid.checksPassed && RunChecks.exitCode(expectedInvalid) == 0)
        #expect(RunChecks.lines(expectedInvalid).first == "expected verdict: invalid (met)")

        // The summary as written keeps the results.
        let data = try? JSONEncoder().encode(summary)
        let decoded = data.flatMap { try? JSONDecoder().decode(RunSummary.self, from: $0) }
        #expect(decoded?.thresholds == summary.thresholds && decoded?.expectedVerdict == .valid)
    }

    @Test(arguments: [
        // verdict, expected, thresholds held → exit code
        (CheckVerdict.valid, CheckVerdict.valid, true, Int32(0)),
        (.invalid, .valid, true, 1),
        (.unknown, .valid, true, 2),
        (.valid, .valid, false, 3),
        (.invalid, .valid, false, 1),
        (.unknown, .valid, false, 2),
        (.invalid, .invalid, true, 0),
        (.invalid, .invalid, false, 3),
        (.valid, .invalid, true, 3),
        (.unknown, .invalid, true, 2),
        (.unknown, .unknown, true, 0),
        (.valid, .unknown, true, 3),
    ])
    func exitCodes(verdict: CheckVerdict, expected: CheckVerdict, thresholdsPassed: Bool, code: Int32) {
        #expect(RunChecks.exitCode(verdict: verdict, expected: expected, thresholdsPassed: thresholdsPassed) == code)
    }

    @Test func theReportShowsEachThresholdWithItsValue() {
        var summary = Self.summary()
        RunChecks.apply(Checks(thresholds: ["synced < 0", "syncAck.p99 < 1s"]), to: &summary)
        let html = RunReport(summary: summary, timeline: [], anomalies: [], scenarioText: "name: t\n").html()
        #expect(html.contains("<h2>Checks</h2>"))
        #expect(html.contains("1 of 2 thresholds held"))
        #expect(html.contains("<tr class=\"fail\"><td><code>synced &lt; 0</code></td><td>40</td><td>FAIL</td></tr>"), "\(html)")
        #expect(html.contains("<tr class=\"pass\"><td><code>syncAck.p99 &lt; 1s</code></td><td>250.0 ms</td><td>pass</td></tr>"))
    }

    @Test func theCoordinatorConfigurationCarriesTheScenarioRateLimits() {
        let limited = Launcher.coordinatorConfiguration(
            CoordinatorSettings(heartbeat: 0.25, rateLimitHourly: 600, rateLimitBurst: 5), store: "/run/coordinator.sqlite")
        #expect(limited["demo-hourly-limit"] as? Int == 600)
        #expect(limited["demo-burst-limit"] as? Int == 5)
        #expect(limited["heartbeat-ms"] as? Int == 250)
        #expect(limited["store"] as? String == "/run/coordinator.sqlite" && limited["seed-demo"] as? Bool == true)
        let unlimited = Launcher.coordinatorConfiguration(CoordinatorSettings(), store: "s")
        #expect(unlimited["demo-hourly-limit"] == nil && unlimited["demo-burst-limit"] == nil)
    }
}
