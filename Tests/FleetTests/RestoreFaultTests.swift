import Foundation
import Testing

@testable import Fleet

/// The `restore_coordinator` fault's syntax and schedule (the run itself: FleetRunProcessTests).
@Suite struct RestoreFaultTests {
    @Test func aRestoreOfTheCoordinatorParsesRendersBackAndIsACoordinatorFault() throws {
        let yaml = ScenarioValidationTests.base + "\nfaults:\n  - {at: 30s, for: 2s, restore_coordinator: {snapshot: 10s}}"
        let scenario = try ScenarioLoader.parse(yaml: yaml, source: "r.yaml")
        #expect(scenario.faults.first?.fault == .restoreCoordinator(snapshot: 10))
        #expect(try ScenarioLoader.parse(yaml: scenario.yaml(), source: "rendered.yaml") == scenario)
        let plan = LaunchPlan.make(scenario: scenario, seed: 3)
        #expect(plan.faults.map(\.targets) == [["coordinator"], ["coordinator"]])
        #expect(plan.faults.map(\.phase) == [.start, .stop])
    }

    @Test(arguments: [
        ("  - {at: 10s, for: 2s, restore_coordinator: {snapshot: 20s}}", "must be before the restore"),
        ("  - {at: 10s, for: 2s, restore_coordinator: {}}", "when, in the run, the launcher copies the store"),
        ("  - {every: 10s, for: 2s, restore_coordinator: {snapshot: 1s}}", "a restore happens once"),
        ("  - {at: 10s, for: 2s, restore_coordinator: {snapshot: 1s}, group: office}", "takes no group"),
        ("  - {at: 10s, for: 5s, kill: coordinator}\n  - {at: 12s, for: 2s, restore_coordinator: {snapshot: 1s}}", "one kill or pause at a time"),
    ])
    func aBadRestoreIsRefused(entry: String, says: String) {
        let yaml = ScenarioValidationTests.base + "\nfaults:\n" + entry
        let error = #expect(throws: ScenarioError.self) { try ScenarioLoader.parse(yaml: yaml, source: "bad.yaml") }
        #expect(error?.description.contains(says) == true, "\(String(describing: error))")
    }
}
