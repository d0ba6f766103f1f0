import Foundation
import SignatureCapture

/// Where every device of a run lives: a pure function of the scenario and the run's
/// seed, so the launcher, the nodes (through their `NodePlan`s) and the checker agree.
///
/// - Node processes are `node-<group>-<n>`, n from 1, in the scenario's group order.
/// - Devices are `<group>-<n>`, n from 1, split into contiguous blocks per process;
///   when the count does not divide evenly the first processes get one more
///   (10 devices over 4 processes: 3, 3, 2, 2).
/// - Each device's seed mixes the run seed, the group's name and the device number,
///   so it does not change when groups are reordered or other groups resized.
public struct FleetLayout: Sendable, Hashable {
    /// One node process and the devices it hosts.
    public struct NodeProcess: Codable, Sendable, Hashable {
        /// `node-<group>-<index>`.
        public var name: String
        public var group: String
        /// 1-based within the group.
        public var index: Int
        public var devices: [DevicePlan]
    }

    public let seed: UInt64
    /// Every node process, group by group, in index order.
    public let processes: [NodeProcess]
    private let processByDevice: [String: Int]

    public init(scenario: Scenario, seed: UInt64) {
        self.seed = seed
        var processes: [NodeProcess] = []
        var processByDevice: [String: Int] = [:]
        for group in scenario.groups {
            let processCount = max(1, min(group.processes, group.count))
            let base = group.count / processCount, remainder = group.count % processCount
            var next = 1
            for index in 1...processCount {
                let size = base + (index <= remainder ? 1 : 0)
                let devices = (next..<(next + size)).map { number in
                    DevicePlan(
                        id: FleetLayout.deviceID(group: group.name, number: number),
                        seed: FleetLayout.deviceSeed(runSeed: seed, group: group.name, number: number))
                }
                for device in devices { processByDevice[device.id] = processes.count }
                processes.append(NodeProcess(name: FleetLayout.processName(group: group.name, index: index), group: group.name, index: index, devices: devices))
                next += size
            }
        }
        self.processes = processes
        self.processByDevice = processByDevice
    }

    public static func processName(group: String, index: Int) -> String { "node-\(group)-\(index)" }
    public static func deviceID(group: String, number: Int) -> String { "\(group)-\(number)" }

    /// The seed of device `<group>-<number>` in a run with `runSeed`.
    public static func deviceSeed(runSeed: UInt64, group: String, number: Int) -> UInt64 {
        var random = SeededRandom(mixing: runSeed, 0xDE71_CE5E_ED00_0001, stableHash(group), UInt64(truncatingIfNeeded: number))
        return random.next()
    }

    /// FNV-1a of the UTF-8 bytes: stable across runs and platforms (unlike `Hasher`).
    static func stableHash(_ text: String) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        return hash
    }

    public func processes(inGroup group: String) -> [NodeProcess] { processes.filter { $0.group == group } }
    public func process(named name: String) -> NodeProcess? { processes.first { $0.name == name } }
    public func process(hostingDevice id: String) -> NodeProcess? { processByDevice[id].map { processes[$0] } }
    public var processNames: [String] { processes.map(\.name) }
    public var devices: [DevicePlan] { processes.flatMap(\.devices) }
    public var deviceCount: Int { processes.reduce(0) { $0 + $1.devices.count } }

    /// The plan of one node process: its devices, its group's behaviour, connectivity
    /// and pens, and its scheduled outages. Nil for a process not in the layout.
    public func nodePlan(
        process name: String, scenario: Scenario, schedule: FaultSchedule, endpoint: String, dataDirectory: String,
        historyFile: String, runStart: Double
    ) -> NodePlan? {
        guard let process = process(named: name), let group = scenario.groups.first(where: { $0.name == process.group }) else {
            return nil
        }
        return NodePlan(
            process: process.name, group: group.name, endpoint: endpoint, dataDirectory: dataDirectory, historyFile: historyFile,
            runStart: runStart, duration: scenario.duration, devices: process.devices, behaviour: group.behaviour,
            connectivity: group.connectivity, pens: group.pens, outages: schedule.outages(for: process.name))
    }
}
