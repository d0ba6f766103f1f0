import Foundation

// INTERIM (until the scenario branch's FleetLayout/FaultSchedule/ScenarioLoader land):
// a plain layout and an unseeded schedule so the launcher can be exercised end to end.
public enum ScenarioLoader {
    public static func load(path: String) throws -> Scenario {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CocoaError(.fileReadNoSuchFile, userInfo: [NSFilePathErrorKey: path])
        }
        return try JSONDecoder().decode(Scenario.self, from: data)
    }
}

extension LaunchPlan {
    public static func make(scenario: Scenario, seed: UInt64) throws -> LaunchPlan {
        var nodes: [NodeProcess] = []
        for group in scenario.groups {
            let perProcess = (group.count + group.processes - 1) / group.processes
            var index = 0
            for process in 1...group.processes {
                var devices: [DevicePlan] = []
                for _ in 0..<perProcess where index < group.count {
                    index += 1
                    devices.append(DevicePlan(id: "\(group.name)-\(index)", seed: seed &+ UInt64(index) &* 7919))
                }
                nodes.append(NodeProcess(process: "node-\(group.name)-\(process)", group: group.name, devices: devices, outages: [], restartBudget: group.restartBudget))
            }
        }
        var faults: [FaultEvent] = []
        for (id, spec) in scenario.faults.enumerated() {
            let targets: [String]
            switch spec.fault {
            case .killCoordinator, .pauseCoordinator: targets = ["coordinator"]
            case .templateEdit: targets = []
            default:
                let candidates = nodes.filter { spec.target.group == nil || $0.group == spec.target.group }.map(\.process)
                targets = Array(candidates.prefix(spec.target.count ?? 1))
            }
            faults.append(FaultEvent(time: spec.at, isStart: true, id: id, fault: spec.fault, targets: targets))
            if let duration = spec.duration {
                faults.append(FaultEvent(time: spec.at + duration, isStart: false, id: id, fault: spec.fault, targets: targets))
            }
        }
        return LaunchPlan(nodes: nodes, faults: faults)
    }
}
