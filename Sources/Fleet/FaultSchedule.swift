import Foundation
import SignatureCapture

/// One concrete step of a run's fault schedule (Jepsen's nemesis operations): a
/// fault starts or stops at a time, on targets chosen with the run's seed.
public struct FaultEvent: Codable, Sendable, Hashable {
    public enum Phase: String, Codable, Sendable {
        /// The fault begins (kill, SIGSTOP, toxic added, proxy disabled, outage begins).
        case start
        /// It ends (restart, SIGCONT, toxic removed, proxy enabled, outage ends).
        case stop
        /// A fault with no duration (a template edit).
        case instant
    }

    /// Seconds from the run's start.
    public var time: Double
    public var phase: Phase
    /// Pairs a start with its stop: `f<entry>.<occurrence>`, both 1-based
    /// (`f2.3` is the third occurrence of the second `faults:` entry). Also a good
    /// Toxiproxy toxic name.
    public var id: String
    /// Index of the entry in `Scenario.faults`.
    public var spec: Int
    /// 0-based occurrence of a repeating entry.
    public var occurrence: Int
    public var fault: Fault
    /// Node process names (for proxy faults: the processes whose proxies get it;
    /// for `offline`: whose devices go offline), `coordinator`, or none (template edit).
    public var targets: [String]
    /// For the log and the report, e.g. "kill -9 node-field-2".
    public var label: String
}

/// A fault's span, for the report's shading and the live progress line.
public struct FaultWindow: Codable, Sendable, Hashable {
    public var id: String
    public var start: Double
    /// Equal to `start` for a template edit.
    public var end: Double
    public var label: String
    public var fault: Fault
    public var targets: [String]
    /// For `offline`: the spec's `return_ramp` (the devices come back over it after `end`).
    public var returnRamp: Double?
}

/// The concrete fault schedule of a run: a pure function of the scenario, its layout
/// and the seed (the same seed gives the same schedule, event for event).
///
/// Rules:
/// - An entry with `every` occurs at `from`, `from + every`, … while before `until`
///   (default: the run's end). Whatever is still active at the run's duration stops
///   there: the final heal. Every start has its stop at or before `duration`.
/// - Targets: the processes of the entry's group (all groups if none), `count` of
///   them or `fraction` (rounded, at least 1), or all; drawn with the seed.
/// - A process takes one kill or pause at a time, and a proxy one partition at a
///   time: the draw skips processes already hit in an overlapping window. An
///   occurrence that finds fewer free processes than it asks for hits those it finds
///   and says so in `notes`; one that finds none is dropped (also in `notes`).
///   Toxics and outages may overlap anything.
public struct FaultSchedule: Codable, Sendable, Hashable {
    /// The target name of coordinator faults (the first coordinator; others are `coordinator-<n>`,
    /// ``CoordinatorSettings/processName(_:)``).
    public static let coordinatorProcess = "coordinator"
    /// The target name of `restart_postgres` (the run's PostgreSQL server).
    public static let postgresProcess = "postgres"

    /// Something the launcher should log: a fault that hit fewer targets than asked, or none.
    public struct Note: Codable, Sendable, Hashable {
        public var id: String
        public var time: Double
        public var message: String
    }

    /// In time order; at the same time stops come before instants, instants before starts.
    public let events: [FaultEvent]
    /// One per occurrence, in start order.
    public let windows: [FaultWindow]
    public let notes: [Note]

    public init(scenario: Scenario, layout: FleetLayout, seed: UInt64) {
        struct Pending {
            var spec: Int, occurrence: Int, start: Double, end: Double
        }
        var pending: [Pending] = []
        let hostileGroups = scenario.nonDeviceGroupNames
        for (index, spec) in scenario.faults.enumerated() {
            for (occurrence, span) in spec.occurrences(runDuration: scenario.duration).enumerated() {
                pending.append(Pending(spec: index, occurrence: occurrence, start: span.start, end: span.end))
            }
        }
        // Draw in time order so that "already hit" means "earlier in the run".
        pending.sort { ($0.start, $0.spec, $0.occurrence) < ($1.start, $1.spec, $1.occurrence) }

        var busy: [String: [(start: Double, end: Double)]] = [:]  // key: "<class>/<process>"
        var events: [FaultEvent] = [], windows: [FaultWindow] = [], notes: [Note] = []
        for item in pending {
            let spec = scenario.faults[item.spec]
            let id = "f\(item.spec + 1).\(item.occurrence + 1)"
            let exclusive = spec.fault.exclusionClass
            func isFree(_ process: String) -> Bool {
                guard let exclusive else { return true }
                return !(busy["\(exclusive)/\(process)"] ?? []).contains { $0.start < item.end && item.start < $0.end }
            }
            let targets: [String]
            switch spec.fault {
            case .templateEdit:
                targets = []
            case .killCoordinator, .pauseCoordinator, .restoreCoordinator:
                let wanted = scenario.coordinatorTargets(spec.target)
                targets = wanted.filter(isFree)
                if targets.isEmpty {
                    notes.append(Note(id: id, time: item.start, message: "dropped: the coordinator is already killed or paused then"))
                } else if targets.count < wanted.count {
                    notes.append(Note(id: id, time: item.start, message: "hits \(targets.count) of the \(wanted.count) coordinators; the others are already killed or paused then"))
                }
            case .partitionHost(let host):
                targets = isFree("host-\(host)") ? [host] : []
                if targets.isEmpty { notes.append(Note(id: id, time: item.start, message: "dropped: host \(host) is already partitioned then")) }
            case .restartPostgres:
                targets = isFree(Self.postgresProcess) ? [Self.postgresProcess] : []
                if targets.isEmpty { notes.append(Note(id: id, time: item.start, message: "dropped: PostgreSQL is already being restarted then")) }
            default:
                // Hostile groups are attackers, not part of the fleet under test: faults never hit them.
                let candidates = layout.processes.filter {
                    !hostileGroups.contains($0.group) && (spec.target.group == nil || $0.group == spec.target.group)
                }.map(\.name)
                let wanted = spec.target.wanted(of: candidates.count)
                var random = SeededRandom(mixing: seed, 0xFA17_5C4E_D01E_0001, UInt64(item.spec), UInt64(item.occurrence))
                var shuffled = candidates
                if shuffled.count > 1 {
                    for i in stride(from: shuffled.count - 1, to: 0, by: -1) { shuffled.swapAt(i, random.int(in: 0...i)) }
                }
                let chosen = Set(shuffled.filter(isFree).prefix(wanted))
                targets = candidates.filter(chosen.contains)
                if targets.isEmpty {
                    notes.append(Note(id: id, time: item.start, message: "dropped: all \(candidates.count) candidate processes are already hit by a \(exclusive ?? "fault") then"))
                } else if targets.count < wanted {
                    notes.append(Note(id: id, time: item.start, message: "hits \(targets.count) of the \(wanted) processes asked for; the others are already hit by a \(exclusive ?? "fault") then"))
                }
            }
            if targets.isEmpty, spec.fault.needsTargets { continue }
            if let exclusive {
                if case .partitionHost(let host) = spec.fault { busy["\(exclusive)/host-\(host)", default: []].append((item.start, item.end)) }
                for target in targets where !spec.fault.isHostFault { busy["\(exclusive)/\(target)", default: []].append((item.start, item.end)) }
            }
            var label = spec.fault.label(targets: targets)
            if spec.fault == .offline, let ramp = spec.returnRamp, ramp > 0 { label += ", back over \(DurationText.render(ramp))" }
            func event(_ time: Double, _ phase: FaultEvent.Phase) -> FaultEvent {
                FaultEvent(time: time, phase: phase, id: id, spec: item.spec, occurrence: item.occurrence, fault: spec.fault, targets: targets, label: label)
            }
            if spec.fault.isInstant {
                events.append(event(item.start, .instant))
            } else {
                events.append(event(item.start, .start))
                events.append(event(item.end, .stop))
            }
            windows.append(
                FaultWindow(
                    id: id, start: item.start, end: item.end, label: label, fault: spec.fault, targets: targets,
                    returnRamp: spec.fault == .offline ? spec.returnRamp : nil))
        }
        events.sort { ($0.time, $0.phase.order, $0.spec, $0.occurrence) < ($1.time, $1.phase.order, $1.spec, $1.occurrence) }
        self.events = events
        self.windows = windows
        self.notes = notes
    }

    /// The scheduled outages of a node process's devices (`offline` faults), merged
    /// where they overlap, relative to the run's start: what goes into its `NodePlan`. A merged
    /// outage's return ramp reaches as far as the farthest of its members' (`max(end + ramp) −
    /// end`), so adding an outage never brings a device back earlier.
    public func outages(for process: String) -> [Outage] {
        let spans = windows.filter { $0.fault == .offline && $0.targets.contains(process) }
            .map { Outage(start: $0.start, end: $0.end, returnRamp: $0.returnRamp.flatMap { $0 > 0 ? $0 : nil }) }
            .sorted { ($0.start, $0.end) < ($1.start, $1.end) }
        var merged: [Outage] = []
        for span in spans {
            if let last = merged.last, span.start <= last.end {
                let end = max(last.end, span.end)
                let reach = max(last.end + (last.returnRamp ?? 0), span.end + (span.returnRamp ?? 0))
                merged[merged.count - 1].end = end
                merged[merged.count - 1].returnRamp = reach > end ? reach - end : nil
            } else {
                merged.append(span)
            }
        }
        return merged
    }

    /// The faults active at `time` (seconds from the start), for the progress line.
    public func activeWindows(at time: Double) -> [FaultWindow] {
        windows.filter { $0.start <= time && time < $0.end }
    }
}

extension FaultEvent.Phase {
    var order: Int {
        switch self {
        case .stop: return 0
        case .instant: return 1
        case .start: return 2
        }
    }
}

extension FaultTarget {
    /// How many of `available` processes the fault asks for.
    func wanted(of available: Int) -> Int {
        if let count { return min(count, available) }
        if let fraction { return min(available, max(1, Int((fraction * Double(available)).rounded()))) }
        return available
    }
}

extension FaultSpec {
    /// The occurrences' (start, end) in seconds from the run's start, cut at `runDuration`.
    func occurrences(runDuration: Double) -> [(start: Double, end: Double)] {
        var starts: [Double] = []
        if let every, every > 0 {
            let limit = min(until ?? runDuration, runDuration)
            var index = 0
            var time = at
            // One past the bound, so the loader sees that the bound is exceeded.
            while time < limit && starts.count <= ScenarioLoader.maximumFaultOccurrences {
                starts.append(time)
                index += 1
                time = at + Double(index) * every
            }
        } else if at < runDuration {
            starts = [at]
        }
        return starts.map { start in
            (start, fault.isInstant ? start : min(start + (duration ?? runDuration), runDuration))
        }
    }
}

extension Fault {
    var isInstant: Bool {
        if case .templateEdit = self { return true }
        return false
    }

    /// Faults on node processes that are dropped when no target is free.
    var needsTargets: Bool { !isInstant }

    /// Faults of one class may not hit the same process in overlapping windows.
    var exclusionClass: String? {
        switch self {
        case .killNode, .pauseNode, .killCoordinator, .pauseCoordinator, .restoreCoordinator, .restoreNode, .restartPostgres: return "kill or pause"
        case .partition, .partitionHost: return "partition"
        default: return nil
        }
    }

    /// "kill node", "toxic latency", … (without targets).
    public var label: String {
        switch self {
        case .killNode: return "kill node"
        case .killCoordinator: return "kill coordinator"
        case .pauseNode: return "pause node"
        case .pauseCoordinator: return "pause coordinator"
        case .offline: return "offline"
        case .toxic(let toxic): return "toxic \(toxic.type)"
        case .partition: return "partition"
        case .templateEdit(let template): return "template edit \(template)"
        case .restoreCoordinator: return "restore coordinator"
        case .restoreNode: return "restore node"
        case .restartPostgres(let crash): return crash ? "restart postgres (kill -9)" : "restart postgres (fast)"
        case .partitionHost: return "partition host"
        }
    }

    /// A fault on a node host's link (its target is the host, not node processes).
    var isHostFault: Bool {
        if case .partitionHost = self { return true }
        return false
    }

    /// A restart of the run's PostgreSQL server.
    var isPostgresFault: Bool {
        if case .restartPostgres = self { return true }
        return false
    }

    /// A fault of the coordinator process (they may not overlap one another).
    var isCoordinatorFault: Bool {
        switch self {
        case .killCoordinator, .pauseCoordinator, .restoreCoordinator: return true
        default: return false
        }
    }

    /// The label with its targets: "kill -9 node-field-2", "toxic latency on 3 proxies".
    public func label(targets: [String]) -> String {
        let list = targets.count <= 3 ? targets.joined(separator: ", ") : "\(targets.count) processes"
        switch self {
        case .killNode, .killCoordinator: return "kill -9 \(list)"
        case .pauseNode, .pauseCoordinator: return "pause \(list)"
        case .offline: return "offline \(list)"
        case .toxic(let toxic): return "toxic \(toxic.type) on \(list)"
        case .partition: return "partition \(list)"
        case .templateEdit(let template): return "template edit \(template)"
        case .restoreCoordinator(let snapshot): return "restore coordinator from its copy at \(DurationText.render(snapshot))"
        case .restoreNode(let snapshot): return "restore \(list)'s device stores from their copies at \(DurationText.render(snapshot))"
        case .restartPostgres(let crash): return crash ? "kill -9 postgres, then restart it" : "stop postgres (fast), then restart it"
        case .partitionHost(let host): return "partition host \(host) (link down)"
        }
    }
}
