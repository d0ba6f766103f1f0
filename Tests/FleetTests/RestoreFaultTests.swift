import Foundation
import Testing

@testable import Fleet

/// The `restore_coordinator` and `restore_node` faults' syntax and schedule (the runs themselves:
/// FleetRunProcessTests).
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

    @Test func aRestoreOfNodesParsesRendersBackAndHitsNodeProcessesOfItsGroup() throws {
        let yaml = ScenarioValidationTests.base + "\nfaults:\n  - {at: 30s, for: 2s, restore_node: {snapshot: 10s}, group: office, count: 2}"
        let scenario = try ScenarioLoader.parse(yaml: yaml, source: "r.yaml")
        #expect(scenario.faults.first?.fault == .restoreNode(snapshot: 10))
        #expect(try ScenarioLoader.parse(yaml: scenario.yaml(), source: "rendered.yaml") == scenario)
        let plan = LaunchPlan.make(scenario: scenario, seed: 3)
        #expect(plan.faults.map(\.phase) == [.start, .stop])
        let targets = try #require(plan.faults.first?.targets)
        #expect(targets.count == 2 && targets.allSatisfy { $0.hasPrefix("node-office-") }, "\(targets)")
        #expect(plan.faults.first?.label.contains("from their copies at 10s") == true, "\(plan.faults.first?.label ?? "")")
    }

    @Test(arguments: [
        ("  - {at: 10s, for: 2s, restore_node: {snapshot: 20s}}", "must be before the restore"),
        ("  - {every: 10s, for: 2s, restore_node: {snapshot: 1s}}", "a restore happens once"),
        ("  - {at: 10s, for: 5s, kill: node, group: field}\n  - {at: 12s, for: 2s, restore_node: {snapshot: 1s}, group: field, count: 3}", "has 2 node processes"),
    ])
    func aBadRestoreOfNodesIsRefused(entry: String, says: String) {
        let yaml = ScenarioValidationTests.base + "\nfaults:\n" + entry
        let error = #expect(throws: ScenarioError.self) { try ScenarioLoader.parse(yaml: yaml, source: "bad.yaml") }
        #expect(error?.description.contains(says) == true, "\(String(describing: error))")
    }

    /// The copies are files of the launcher's machine: a group on a node host keeps its stores there.
    @Test func aRestoreOfNodesOnANodeHostIsRefused() throws {
        let remote = MultiHostTests.hostsYAML + "\n  - {at: 20s, for: 2s, restore_node: {snapshot: 1s}, group: north}"
        let error = #expect(throws: ScenarioError.self) { try ScenarioLoader.parse(yaml: remote, source: "hosts.yaml") }
        #expect(error?.description.contains("not supported for groups on node hosts: north (on host a)") == true, "\(String(describing: error))")
        let local = MultiHostTests.hostsYAML + "\n  - {at: 20s, for: 2s, restore_node: {snapshot: 1s}, group: office}"
        #expect(try ScenarioLoader.parse(yaml: local, source: "hosts.yaml").faults.last?.fault == .restoreNode(snapshot: 1))
    }
}
