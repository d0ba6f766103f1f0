import Foundation
import Synchronization

/// What the launcher learns from its children's standard output, updated from the
/// supervisor's events (on its tasks) and read by the launcher's main loop.
final class LauncherState: Sendable {
    struct Contents {
        var aggregator: FleetStatsAggregator
        /// The latest value of each announced prefix per process: `listening`, `http`, `api`.
        var announced: [String: [String: String]] = [:]
        var drained: Set<String> = []
        var gaveUp: Set<String> = []
        /// Starts of each process since the run began.
        var starts: [String: Int] = [:]
        var statsLines = 0
        /// Node processes that printed a stats line since their latest start (they are up).
        var reported: Set<String> = []
    }

    private let contents: Mutex<Contents>
    let nodeNames: Set<String>
    /// Rung on every event the launcher's waits care about: a start, an exit, an announcement,
    /// a stats line, `drained`, a restart budget run out (and the launcher's interrupt).
    let changes = Doorbell()

    init(devicesPerProcess: [String: Int]) {
        contents = Mutex(Contents(aggregator: FleetStatsAggregator(devicesPerProcess: devicesPerProcess)))
        nodeNames = Set(devicesPerProcess.keys)
    }

    static let announcedPrefixes = ["listening", "http", "api", "curve-public-key"]

    func handle(_ event: SupervisorEvent) {
        if record(event) { changes.ring() }
    }

    /// Records the event; true when a wait may care (not an ordinary line or a node's later stats).
    private func record(_ event: SupervisorEvent) -> Bool {
        switch event {
        case .started(let name, _, _):
            contents.withLock {
                $0.starts[name, default: 0] += 1
                // A fresh process announces again; forget the old values.
                $0.announced[name] = [:]
                $0.reported.remove(name)
                if nodeNames.contains(name) { $0.aggregator.setUnavailable(name, false) }
            }
        case .line(let name, let text):
            if text.hasPrefix(NodeStats.linePrefix) {
                let json = Data(text.dropFirst(NodeStats.linePrefix.count).utf8)
                guard json.count <= 64 * 1024, let stats = try? JSONDecoder().decode(NodeStats.self, from: json) else { return false }
                return contents.withLock {
                    $0.aggregator.record(stats, from: name)
                    $0.statsLines += 1
                    return $0.reported.insert(name).inserted
                }
            } else if text == "drained" {
                _ = contents.withLock { $0.drained.insert(name) }
                return true
            } else if let space = text.firstIndex(of: " "), Self.announcedPrefixes.contains(String(text[..<space])) {
                let key = String(text[..<space])
                let value = String(text[text.index(after: space)...]).trimmingCharacters(in: .whitespaces)
                contents.withLock { $0.announced[name, default: [:]][key] = value }
                return true
            }
            return false
        case .exited(let name, _, _):
            if nodeNames.contains(name) { contents.withLock { $0.aggregator.setUnavailable(name, true) } }
        case .gaveUp(let name, _):
            _ = contents.withLock { $0.gaveUp.insert(name) }
        }
        return true
    }

    func announced(_ key: String, by process: String) -> String? {
        contents.withLock { $0.announced[process]?[key] }
    }

    func starts(of process: String) -> Int { contents.withLock { $0.starts[process] ?? 0 } }
    var drained: Set<String> { contents.withLock { $0.drained } }
    func hasReported(_ process: String) -> Bool { contents.withLock { $0.reported.contains(process) } }
    var gaveUp: Set<String> { contents.withLock { $0.gaveUp } }

    func setUnavailable(_ process: String, _ unavailable: Bool) {
        contents.withLock { $0.aggregator.setUnavailable(process, unavailable) }
    }

    func sample(time: Double, activeFaults: [String]) -> TimelineSample {
        contents.withLock { $0.aggregator.sample(time: time, activeFaults: activeFaults) }
    }
}
