import Foundation
import Testing

@testable import Fleet

/// Verdicts are ``CheckVerdict`` everywhere (the checker's outcome, the scenario's expectation,
/// the summary), and summary.json keeps writing them as the text it always had.
@Suite struct CheckerVerdictTests {
    @Test func aVerdictIsWrittenAndPrintedAsItsText() throws {
        #expect(CheckVerdict.allCases.map(\.rawValue) == ["valid", "invalid", "unknown"])
        #expect(CheckVerdict.allCases.map { "\($0)" } == ["valid", "invalid", "unknown"])
        #expect(ScenarioReader.verdicts == ["valid", "invalid", "unknown"], "the choices a scenario's checks.verdict offers")

        var summary = FleetThresholdTests.summary(verdict: .invalid)
        RunChecks.apply(Checks(verdict: .unknown), to: &summary)
        let data = try JSONEncoder().encode(summary)
        let json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(json["verdict"] as? String == "invalid")
        #expect(json["expectedVerdict"] as? String == "unknown")
        #expect(try JSONDecoder().decode(RunSummary.self, from: data) == summary)

        let checks = try JSONEncoder().encode(Checks(verdict: .invalid, thresholds: ["lost >= 1"]))
        #expect(String(decoding: checks, as: UTF8.self).contains("\"verdict\":\"invalid\""))
    }

    /// A summary.json written while the verdicts were strings reads back typed; one with a text
    /// that names no verdict is refused, not read as some verdict.
    @Test func anOlderSummaryReadsBackTyped() throws {
        let written = try JSONEncoder().encode(FleetThresholdTests.summary())
        var json = try #require(try JSONSerialization.jsonObject(with: written) as? [String: Any])
        json["verdict"] = "unknown"
        json["expectedVerdict"] = "invalid"
        let read = try JSONDecoder().decode(RunSummary.self, from: try JSONSerialization.data(withJSONObject: json))
        #expect(read.verdict == .unknown && read.expectedVerdict == .invalid)
        #expect(RunChecks.exitCode(read) == 2)
        json["verdict"] = "fine"
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(RunSummary.self, from: try JSONSerialization.data(withJSONObject: json)) }
    }

    @Test func aCheckerThatCannotRunGivesUnknown() async throws {
        let nowhere = FileManager.default.temporaryDirectory.appendingPathComponent("no-run-\(UUID().uuidString)").path
        let outcome = await FleetCheck.run(RunDirectory(path: nowhere))
        #expect(outcome.verdict == .unknown)
        #expect(outcome.counts == nil)
        #expect(outcome.notes.first?.hasPrefix("the checker could not run") == true, "\(outcome.notes)")
    }

    @Test func theLauncherPassesTheCheckersVerdictOn() async throws {
        let fixture = try await CheckerRun.make(devices: ["a-1"], envelopes: 1)
        defer { fixture.remove() }
        let valid = await FleetCheck.run(fixture.run)
        #expect(valid.verdict == .valid, "\(valid.notes)")
        let broken = try fixture.copy()
        try CheckerRun.edit(broken.coordinatorStore) { db in try db.execute(sql: "DELETE FROM envelope") }
        let invalid = await FleetCheck.run(broken)
        #expect(invalid.verdict == .invalid)
        #expect(invalid.anomalies.map(\.kind) == ["lost"])
        #expect(try CheckReport.read(from: broken.checkFile).verdict == .invalid)
    }
}
