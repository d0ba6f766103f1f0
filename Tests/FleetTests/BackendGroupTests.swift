import Foundation
import Testing

@testable import Coordinator
@testable import Fleet

/// Backend groups (docs/scenarios.md, "`backend`"): REST integrations beside the devices, and the
/// checker's rule on what they were told (docs/checker.md, "`backend-mismatch`").
@Suite struct BackendGroupTests {
    static let scenario = ScenarioValidationTests.base + """

          - name: backoffice
            count: 3
            backend: {envelopes_per_minute: 12, decline_rate: 0.25, void_rate: 0.5}
        faults:
          - {at: 5s, for: 2s, kill: node}
        """

    @Test func aBackendGroupParsesRendersBackAndIsNoFaultTarget() throws {
        let scenario = try ScenarioLoader.parse(yaml: Self.scenario, source: "b.yaml")
        let group = try #require(scenario.groups.first { $0.name == "backoffice" })
        #expect(group.backend == BackendSettings(envelopesPerMinute: 12, declineRate: 0.25, voidRate: 0.5) && !group.runsDevices)
        #expect(scenario.nonDeviceGroupNames == ["backoffice"])
        #expect(try ScenarioLoader.parse(yaml: scenario.yaml(), source: "rendered.yaml") == scenario)
        for seed in UInt64(1)...30 {
            let plan = LaunchPlan.make(scenario: scenario, seed: seed)
            for event in plan.faults { #expect(event.targets.allSatisfy { !$0.hasPrefix("node-backoffice-") }, "seed \(seed): \(event)") }
        }
    }

    @Test(arguments: [
        ("  - {name: b, count: 1, backend: {envelopes_per_minute: 601}}", "groups[2].backend.envelopes_per_minute", "600"),
        ("  - {name: b, count: 1, backend: {decline_rate: 2}}", "groups[2].backend.decline_rate", "must be 0 to 1"),
        ("  - {name: b, count: 1, backend: {rate: 1}}", "groups[2].backend.rate", "envelopes_per_minute"),
        ("  - {name: b, count: 1, backend: {decline_rate: 0.6, void_rate: 0.5}}", "groups[2].backend.void_rate", "at most 1"),
        ("  - {name: b, count: 1, pens: {finger: 1}, backend: {}}", "groups[2].pens", "a backend group drives the REST API"),
    ])
    func aBadBackendGroupIsRefusedWithLineAndField(entry: String, field: String, says: String) {
        let yaml = ScenarioValidationTests.base + "\n" + entry
        let error = #expect(throws: ScenarioError.self) { try ScenarioLoader.parse(yaml: yaml, source: "bad.yaml") }
        #expect(error?.field == field, "\(String(describing: error))")
        #expect(error?.description.contains(says) == true, "\(String(describing: error))")
    }

    /// One draw per ceremony: void below `void_rate`, decline below `void_rate + decline_rate`, sign
    /// above; with no voids the draws that declined before still decline.
    @Test func oneDrawPicksVoidDeclineOrSign() throws {
        let settings = BackendSettings(declineRate: 0.25, voidRate: 0.5)
        #expect([0, 0.49, 0.5, 0.74, 0.75, 0.99].map(settings.outcome(draw:)) == [.void, .void, .decline, .decline, .sign, .sign])
        let noVoids = BackendSettings(declineRate: 0.25)
        #expect([0, 0.24, 0.25].map(noVoids.outcome(draw:)) == [.decline, .decline, .sign])
        // A plan written before void_rate existed still reads.
        let old = try JSONDecoder().decode(BackendSettings.self, from: Data(#"{"envelopesPerMinute": 6, "declineRate": 0.1}"#.utf8))
        #expect(old == BackendSettings(envelopesPerMinute: 6, declineRate: 0.1, voidRate: 0))
    }

    @Test func aRestoredCoordinatorOrABackendOnlyScenarioIsRefused() {
        let restore = ScenarioValidationTests.base + "\n  - {name: b, count: 1, backend: {}}\nfaults:\n  - {at: 20s, restore_coordinator: {snapshot: 10s}}"
        let error = #expect(throws: ScenarioError.self) { try ScenarioLoader.parse(yaml: restore, source: "bad.yaml") }
        #expect(error?.description.contains("not supported with backend groups") == true, "\(String(describing: error))")
        let only = "name: v\nduration: 60s\ngroups:\n  - {name: b, count: 1, backend: {}}"
        let alone = #expect(throws: ScenarioError.self) { try ScenarioLoader.parse(yaml: only, source: "bad.yaml") }
        #expect(alone?.description.contains("no group runs signing devices") == true, "\(String(describing: alone))")
    }

    /// A backend's log says a create succeeded for an envelope the server does not have, that its
    /// signer signed an envelope the server holds only `sent`, and that it voided another the
    /// server holds `sent`: three `backend-mismatch` anomalies, each with the log line and the server row as witness. What the server does have
    /// and agrees with is not reported.
    @Test func whatABackendWasToldMustHoldOnTheServer() async throws {
        let fixture = try await CheckerRun.make(rest: 2)
        defer { fixture.remove() }
        let run = try fixture.copy()
        let sent = CheckerTests.serverID("rest-tx-1"), other = CheckerTests.serverID("rest-tx-2")
        let log = try HistoryWriter(path: run.backendLogFile(process: "node-backoffice-1"))
        for event in [
            BackendEvent(time: 1, backend: "backoffice-1", step: .login, envelope: nil, result: "ok"),
            BackendEvent(time: 2, backend: "backoffice-1", step: .create, envelope: sent, result: "ok"),
            BackendEvent(time: 3, backend: "backoffice-1", step: .create, envelope: other, result: "ok"),
            BackendEvent(time: 4, backend: "backoffice-1", step: .create, envelope: "env-never-made", result: "ok"),
            BackendEvent(time: 5, backend: "backoffice-1", step: .sign, envelope: sent, result: "ok"),
            BackendEvent(time: 6, backend: "backoffice-1", step: .decline, envelope: other, result: "rest.open", detail: "timed out"),
            BackendEvent(time: 7, backend: "backoffice-1", step: .void, envelope: other, result: "ok"),
        ] { try log.appendLine(event) }
        log.close()
        let report = try await Checker.check(run: run)
        #expect(report.verdict == .invalid, "\(report.summary())")
        let mismatches = report.anomalies.filter { $0.kind == .backendMismatch }
        #expect(mismatches.count == 3 && report.anomalies.count == 3, "\(report.summary())")
        #expect(mismatches.contains { $0.message.contains("no envelope env-never-made") })
        #expect(mismatches.contains { $0.message.contains("holds it sent, not completed") && $0.serverEnvelope == sent }, "\(mismatches.map(\.message))")
        #expect(mismatches.contains { $0.message.contains("voiding envelope") && $0.message.contains("holds it sent, not voided") && $0.serverEnvelope == other })
        #expect(mismatches.allSatisfy { CheckerTests.witnessText($0).contains("backoffice-1") })
        #expect(report.notes.contains { $0.hasPrefix("backend groups: create 3 ok, 0 failed") }, "\(report.notes)")
    }
}
