import Foundation
import Testing

@testable import Fleet

/// The scenarios in `scenarios/` load, round-trip and give a full schedule.
@Suite struct ScenarioShippedTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("scenarios")

    static var files: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).filter { $0.hasSuffix(".yaml") }.sorted()
    }

    @Test func theFourNamedScenariosAreShipped() {
        #expect(Set(["smoke.yaml", "offline-field-day.yaml", "flaky-network.yaml", "coordinator-crashes.yaml", "coordinator-restore.yaml", "node-restore.yaml", "hostile-peers.yaml", "coordinator-cluster.yaml"]).isSubset(of: Set(Self.files)))
    }

    @Test(arguments: files)
    func loadsRoundTripsAndSchedules(file: String) throws {
        let scenario = try ScenarioLoader.load(path: Self.directory.appendingPathComponent(file).path)
        #expect(scenario.name + ".yaml" == file)
        #expect(try ScenarioLoader.parse(yaml: scenario.yaml(seed: 77), source: file).seed == 77)
        var seeded = scenario
        seeded.seed = 77
        #expect(try ScenarioLoader.parse(yaml: scenario.yaml(seed: 77), source: file) == seeded)
        let layout = FleetLayout(scenario: scenario, seed: 77)
        let schedule = FaultSchedule(scenario: scenario, layout: layout, seed: 77)
        #expect(layout.deviceCount == scenario.groups.reduce(0) { $0 + $1.count })
        #expect(!schedule.events.isEmpty)
        #expect(schedule.events.allSatisfy { $0.time <= scenario.duration })
        #expect(schedule.notes == [], "\(schedule.notes)")
    }

    @Test func smokeHasEveryKindOfFaultOnTwentyDevicesInAboutAMinute() throws {
        let scenario = try ScenarioLoader.load(path: Self.directory.appendingPathComponent("smoke.yaml").path)
        #expect(scenario.proxy)
        #expect(scenario.duration <= 90)
        #expect(scenario.groups.reduce(0) { $0 + $1.count } == 20)
        #expect(scenario.groups.reduce(0) { $0 + $1.processes } == 4)
        let faults = Set(scenario.faults.map(\.fault.label))
        #expect(faults.isSuperset(of: ["kill node", "pause node", "kill coordinator", "toxic latency"]))
        #expect(scenario.groups.contains { if case .gilbertElliott = $0.connectivity.model { true } else { false } })
        #expect(scenario.groups.contains { $0.connectivity.model == .alwaysOnline })
    }
}
