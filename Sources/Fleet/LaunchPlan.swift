import Foundation

/// What the launcher runs, worked out before anything starts: the node processes
/// with their devices (from the scenario's layout) and the concrete fault events
/// (from the seeded fault schedule). Everything random is decided here, from the
/// seed, so the same seed gives the same plan.
public struct LaunchPlan: Sendable, Hashable {
    public struct NodeProcess: Sendable, Hashable {
        public var process: String
        public var group: String
        public var devices: [DevicePlan]
        /// Scheduled outages of this process's devices (seconds from the run's start).
        public var outages: [Outage]
        public var restartBudget: Int
        /// The node host it runs on (``FleetHost/name``); nil: the launcher's machine.
        public var host: String?

        public init(process: String, group: String, devices: [DevicePlan], outages: [Outage], restartBudget: Int) {
            self.process = process
            self.group = group
            self.devices = devices
            self.outages = outages
            self.restartBudget = restartBudget
        }
    }

    public var nodes: [NodeProcess]
    /// The concrete fault events (``FaultSchedule``), in order.
    public var faults: [FaultEvent]
    /// What the schedule could not do as asked (too few free targets, …).
    public var notes: [String]

    public init(nodes: [NodeProcess], faults: [FaultEvent], notes: [String] = []) {
        self.nodes = nodes
        self.faults = faults
        self.notes = notes
    }

    /// The plan of `scenario` with `seed`: ``FleetLayout`` for the processes and
    /// devices, ``FaultSchedule`` for the events and the outages.
    public static func make(scenario: Scenario, seed: UInt64) -> LaunchPlan {
        let layout = FleetLayout(scenario: scenario, seed: seed)
        let schedule = FaultSchedule(scenario: scenario, layout: layout, seed: seed)
        let budgets = Dictionary(scenario.groups.map { ($0.name, $0.restartBudget) }, uniquingKeysWith: { first, _ in first })
        let nodes = layout.processes.map { process in
            NodeProcess(
                process: process.name, group: process.group, devices: process.devices, outages: schedule.outages(for: process.name),
                restartBudget: budgets[process.group] ?? 5)
        }.map { node in
            var node = node
            node.host = scenario.host(ofGroup: node.group)?.name
            return node
        }
        return LaunchPlan(nodes: nodes, faults: schedule.events, notes: schedule.notes.map { "\($0.id) at \($0.time)s: \($0.message)" })
    }
}
