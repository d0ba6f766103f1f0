import Foundation
import Testing

@testable import Fleet

/// `coordinator: {store: …}`, `coordinators: N`, coordinator-targeted faults and `restart_postgres`
/// (docs/scenarios.md): what they read to, what they refuse with which line and field, and the
/// schedule they make.
@Suite struct ScenarioClusterTests {
    static let base = """
        name: c
        duration: 60s
        coordinator:
          store: postgres
        coordinators: 3
        groups:
          - {name: office, count: 6, processes: 2}
        """

    static func with(_ change: (old: String, new: String)? = nil, faults: String? = nil) -> String {
        var yaml = base
        if let change { yaml = yaml.replacingOccurrences(of: change.old, with: change.new) }
        if let faults { yaml += "\nfaults:\n" + faults }
        return yaml
    }

    static let cases: [ScenarioValidationTests.Case] = [
        .init(yaml: with(("  store: postgres", "  store: sqlite")), line: 5, field: "coordinators", says: "3 coordinators need a shared store: set `coordinator: {store: postgres}`"),
        .init(yaml: with(("coordinators: 3", "coordinators: 6")), line: 5, field: "coordinators", says: "must be 1 to 5, got 6"),
        .init(yaml: with(("coordinators: 3", "coordinators: 0")), line: 5, field: "coordinators", says: "must be 1 to 5, got 0"),
        .init(yaml: with(("  store: postgres", "  store: mysql")), line: 4, field: "coordinator.store", says: "must be one of sqlite, postgres"),
        .init(
            yaml: with(("  store: postgres", "  store: \"postgres://u@db.example/fleet?schema=x\"")), line: 4, field: "coordinator.store",
            says: "has a query or a fragment"),
        .init(yaml: with(("  store: postgres", "  store: \"postgres://db.example/fleet\"")), line: 4, field: "coordinator.store", says: "postgres://user[:password]@host[:port]/database"),
        .init(yaml: with(("  store: postgres", "  store: \"postgres://u:hunter2@db.example\"")), line: 4, field: "coordinator.store", says: "names no database"),
        .init(yaml: with(("name: c", "name: c\nproxy: true")), line: 6, field: "coordinators", says: "with `proxy: true` is not supported yet"),
        .init(yaml: with(faults: "  - {at: 5s, for: 5s, kill: coordinator, coordinator: 4}"), line: 9, field: "faults[0].coordinator", says: "is 4 but the scenario has 3 coordinators"),
        .init(yaml: with(faults: "  - {at: 5s, for: 5s, kill: node, coordinator: 2}"), line: 9, field: "faults[0].coordinator", says: "only `kill: coordinator` and `pause: coordinator` take one"),
        .init(
            yaml: with(faults: "  - {at: 5s, for: 5s, kill: coordinator, coordinator: 2}\n  - {at: 8s, for: 1s, pause: coordinator}"),
            line: 10, field: "faults[1]", says: "overlaps faults[0] (kill coordinator from 5s to 10s) at 8s; a coordinator takes one kill or pause at a time"),
        .init(
            yaml: with(faults: "  - {at: 5s, for: 5s, restart_postgres: kill}\n  - {at: 6s, for: 1s, restart_postgres: fast}"),
            line: 10, field: "faults[1]", says: "PostgreSQL takes one restart at a time"),
        .init(yaml: with(faults: "  - {at: 5s, for: 5s, restart_postgres: now}"), line: 9, field: "faults[0].restart_postgres", says: "must be one of kill, fast"),
        .init(yaml: with(faults: "  - {at: 5s, for: 5s, restart_postgres: kill, group: office}"), line: 9, field: "faults[0].group", says: "restart_postgres takes no group"),
        .init(
            yaml: with(faults: "  - {at: 9s, for: 5s, restore_coordinator: {snapshot: 5s}}"), line: 9, field: "faults[0].restore_coordinator",
            says: "not supported with `coordinator: {store: postgres}`"),
        .init(
            yaml: "name: c\nduration: 60s\ngroups: [{name: a, count: 1}]\nfaults:\n  - {at: 5s, for: 1s, restart_postgres: kill}", line: 5,
            field: "faults[0].restart_postgres", says: "needs `coordinator: {store: postgres}`"),
        .init(
            yaml: "name: c\nduration: 60s\ncoordinator: {store: \"postgres://u@db.example/fleet\"}\ngroups: [{name: a, count: 1}]\nfaults:\n  - {at: 5s, for: 1s, restart_postgres: kill}",
            line: 6, field: "faults[0].restart_postgres", says: "with an external server"),
    ]

    @Test(arguments: cases)
    func errorNamesLineAndField(_ testCase: ScenarioValidationTests.Case) {
        ScenarioValidationTests().errorNamesLineAndField(testCase)
    }

    @Test func clusterSettingsReadAndRenderBack() throws {
        let yaml = Self.with(faults: """
              - {at: 5s, for: 4s, kill: coordinator, coordinator: 2}
              - {at: 5s, for: 4s, pause: coordinator, coordinator: 3}
              - {at: 12s, for: 2s, kill: coordinator}
              - {at: 20s, for: 3s, restart_postgres: kill}
              - {at: 30s, for: 3s, restart_postgres: fast}
            """)
        let scenario = try ScenarioLoader.parse(yaml: yaml, source: "c.yaml")
        #expect(scenario.coordinator.store == .postgres && scenario.coordinator.instances == 3)
        #expect(scenario.coordinator.processNames == ["coordinator", "coordinator-2", "coordinator-3"])
        #expect(scenario.faults.map(\.target.coordinator) == [2, 3, nil, nil, nil])
        #expect(scenario.faults[3].fault == .restartPostgres(crash: true) && scenario.faults[4].fault == .restartPostgres(crash: false))
        #expect(try ScenarioLoader.parse(yaml: scenario.yaml(), source: "back.yaml") == scenario)

        // A kill of coordinator 2 and a pause of coordinator 3 overlap: different processes.
        let schedule = FaultSchedule(scenario: scenario, layout: FleetLayout(scenario: scenario, seed: 7), seed: 7)
        #expect(schedule.notes.isEmpty, "\(schedule.notes)")
        let starts = schedule.events.filter { $0.phase == .start }
        #expect(starts.map(\.targets) == [["coordinator-2"], ["coordinator-3"], ["coordinator", "coordinator-2", "coordinator-3"], ["postgres"], ["postgres"]])
        #expect(starts[3].label == "kill -9 postgres, then restart it")

        let external = try ScenarioLoader.parse(
            yaml: "name: e\nduration: 10s\ncoordinator: {store: \"postgres://fleet:secret@db.example:6543/runs\"}\ncoordinators: 2\ngroups: [{name: a, count: 2}]",
            source: "e.yaml")
        #expect(external.coordinator.store == .postgresURL("postgres://fleet:secret@db.example:6543/runs") && external.coordinator.instances == 2)
        #expect(try ScenarioLoader.parse(yaml: external.yaml(), source: "back.yaml") == external)
        // The default: SQLite, one coordinator.
        let plain = try ScenarioLoader.parse(yaml: "name: p\nduration: 10s\ngroups: [{name: a, count: 2}]", source: "p.yaml")
        #expect(plain.coordinator.store == .sqlite && plain.coordinator.instances == 1)
    }

    @Test func aDeviceStartsOnTheCoordinatorItsNumberChoosesAndFailsOverToTheOthers() throws {
        var plan = NodePlan(
            process: "node-office-1", group: "office", endpoint: "tcp://127.0.0.1:1", dataDirectory: "/tmp/d", historyFile: "/tmp/h",
            runStart: 1_000, duration: 10, devices: (1...4).map { DevicePlan(id: "office-\($0)", seed: UInt64($0)) }, behaviour: Behaviour(),
            connectivity: Connectivity(), pens: ["applePencil": 1])
        plan.failoverEndpoints = ["tcp://127.0.0.1:2", "tcp://127.0.0.1:3"]
        try plan.validate()
        let orders = plan.devices.map { device in
            let configuration = SimulatedDeviceConfiguration(plan: plan, device: device)
            return ([configuration.endpoint] + configuration.failoverEndpoints).map { $0.split(separator: ":").last.map(String.init) ?? "" }
        }
        #expect(orders == [["1", "2", "3"], ["2", "3", "1"], ["3", "1", "2"], ["1", "2", "3"]])
        plan.failoverEndpoints = [""]
        #expect(throws: NodePlanError.self) { try plan.validate() }
    }
}
