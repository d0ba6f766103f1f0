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

        public init(process: String, group: String, devices: [DevicePlan], outages: [Outage], restartBudget: Int) {
            self.process = process
            self.group = group
            self.devices = devices
            self.outages = outages
            self.restartBudget = restartBudget
        }
    }

    /// One half of a fault: its start or its stop, at a time, on concrete targets.
    public struct FaultEvent: Sendable, Hashable {
        /// Seconds from the run's start.
        public var time: Double
        public var isStart: Bool
        /// Pairs a start with its stop.
        public var id: Int
        public var fault: Fault
        /// Process names (node processes, `coordinator`); proxies are named after their node process.
        public var targets: [String]

        public init(time: Double, isStart: Bool, id: Int, fault: Fault, targets: [String]) {
            self.time = time
            self.isStart = isStart
            self.id = id
            self.fault = fault
            self.targets = targets
        }
    }

    public var nodes: [NodeProcess]
    /// Sorted by time.
    public var faults: [FaultEvent]

    public init(nodes: [NodeProcess], faults: [FaultEvent]) {
        self.nodes = nodes
        self.faults = faults.sorted { ($0.time, $0.id, $0.isStart ? 1 : 0) < ($1.time, $1.id, $1.isStart ? 1 : 0) }
    }
}

extension Fault {
    /// The fault's name in histories, progress and report: `kill-node`, `toxic latency`, …
    public var label: String {
        switch self {
        case .killNode: return "kill-node"
        case .killCoordinator: return "kill-coordinator"
        case .pauseNode: return "pause-node"
        case .pauseCoordinator: return "pause-coordinator"
        case .offline: return "offline"
        case .toxic(let spec): return "toxic \(spec.type)"
        case .partition: return "partition"
        case .templateEdit(let template): return "template-edit \(template)"
        }
    }
}

/// The scenario file as run: its text with the seed set, so the copy in the run
/// directory replays the run on its own.
public enum ScenarioText {
    public static func withSeed(_ text: String, seed: UInt64) -> String {
        var lines = text.components(separatedBy: "\n")
        // A top-level `seed:` line (no indentation) is replaced; otherwise one is added first.
        if let index = lines.firstIndex(where: { $0.hasPrefix("seed:") }) {
            lines[index] = "seed: \(seed)"
        } else {
            lines.insert("seed: \(seed)", at: 0)
        }
        return lines.joined(separator: "\n")
    }
}
