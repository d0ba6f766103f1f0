import Foundation
import Testing

@testable import Fleet

@Suite struct LaunchPlanTests {
    static let yaml = """
        name: plan-test
        duration: 60s
        proxy: true
        groups:
          - name: field
            count: 40
            processes: 10
            connectivity: always_online
        faults:
          - {every: 10s, from: 5s, for: 3s, kill: node, group: field, count: 2}
          - {at: 20s, for: 5s, toxic: {type: latency, latency: 100}, fraction: 0.3}
          - {at: 30s, for: 5s, offline: {group: field, count: 3}}

        """

    @Test func theSameSeedGivesTheSamePlanAndAnotherSeedAnotherOne() throws {
        let scenario = try ScenarioLoader.parse(yaml: Self.yaml, source: "plan-test.yaml")
        let first = LaunchPlan.make(scenario: scenario, seed: 7)
        let again = LaunchPlan.make(scenario: scenario, seed: 7)
        #expect(first == again)
        #expect(first.nodes.count == 10)
        #expect(first.nodes.reduce(0) { $0 + $1.devices.count } == 40)
        #expect(first.faults.contains { $0.phase == .start && $0.fault == .killNode && $0.targets.count == 2 })
        // Outages of the `offline` fault reach the nodes' plans.
        #expect(first.nodes.filter { !$0.outages.isEmpty }.count == 3)

        let other = LaunchPlan.make(scenario: scenario, seed: 8)
        #expect(other.faults.map(\.targets) != first.faults.map(\.targets), "targets are drawn with the seed")
        #expect(other.faults.map(\.id) == first.faults.map(\.id), "the times and ids come from the scenario")
    }
}
