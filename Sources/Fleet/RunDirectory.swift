import FleetProtocol
import Foundation

/// The layout of one fleet run's directory, `runs/<yyyyMMdd-HHmmss>/`, with
/// `runs/latest` pointing at the newest. Every process of the run and the checker
/// agree on these names; `signfleet check <run dir>` needs nothing else.
///
/// ```
/// runs/20261121-141500/
///   scenario.yaml        the scenario as run, with its seed filled in
///   summary.json         counts, rates, latency percentiles, verdict
///   check.json           the checker's verdict and anomalies with witnesses
///   history.jsonl        every process's history merged by time
///   history/<process>.jsonl
///   timeline.jsonl       the launcher's periodic samples (for the report's plots)
///   logs/<process>.log   stderr of each process (stdout in <process>.out)
///   nodes/<process>.json the NodePlan each node process ran
///   coordinator.json     the coordinator's configuration (store, heartbeat, the demo
///                        account's rate limits from the scenario)
///   coordinator.sqlite   the coordinator's store (SQLite, the default)
///   postgres/            with `coordinator: {store: postgres}`: the run's PostgreSQL cluster
///                        (data/, server.log, port); coordinator.json names its URL
///   devices/<device>.sqlite  (gathered from node hosts at the end, when the scenario has `hosts`)
///   hosts/<host>.tar     node hosts only, while unpacked or when unpacking failed: what the host sent
///   hostile/<process>.jsonl  what hostile groups tried and got (only with hostile groups)
///   backend/<process>.jsonl  what backend groups did over the REST API (only with backend groups)
///   report.html          self-contained report
/// ```
public struct RunDirectory: Sendable, Hashable {
    public let path: String

    public init(path: String) {
        self.path = path
    }

    func file(_ name: String) -> String { URL(fileURLWithPath: path).appendingPathComponent(name).path }

    public var scenarioFile: String { file("scenario.yaml") }
    public var summaryFile: String { file("summary.json") }
    public var checkFile: String { file("check.json") }
    public var historyFile: String { file("history.jsonl") }
    public var historyDirectory: String { file("history") }
    public var timelineFile: String { file("timeline.jsonl") }
    public var logsDirectory: String { file("logs") }
    public var nodePlansDirectory: String { file("nodes") }
    public var coordinatorStore: String { file("coordinator.sqlite") }
    /// The coordinator's store as the run used it: the `postgres://` URL of `coordinator.json`'s
    /// `store` when it names one (a `coordinator: {store: postgres}` scenario), else ``coordinatorStore``.
    public var coordinatorStoreLocation: String {
        guard let data = FileManager.default.contents(atPath: coordinatorConfigFile), data.count <= 1 << 20,
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any], let store = object["store"] as? String,
            store.hasPrefix("postgres://") || store.hasPrefix("postgresql://")
        else { return coordinatorStore }
        return store
    }
    /// A throwaway PostgreSQL cluster of the run (`coordinator: {store: postgres}`): `postgres/data`
    /// (the cluster), `postgres/server.log`, `postgres/port`.
    public var postgresDirectory: String { file("postgres") }
    public var coordinatorConfigFile: String { file("coordinator.json") }
    /// The coordinator's CURVE public key (Z85, one line), written by the coordinator at start.
    public var coordinatorPublicKeyFile: String { file("coordinator.pub") }
    public var devicesDirectory: String { file("devices") }
    /// Node hosts' `tar` streams of their `history/` and `devices/` while they are unpacked
    /// (removed after; kept when unpacking failed). Absent without `hosts`.
    public var hostsDirectory: String { file("hosts") }
    public var reportFile: String { file("report.html") }
    /// Hostile groups' attempts, `<process>.jsonl` each (``HostileAttempt`` per line); absent
    /// without hostile groups.
    public var hostileDirectory: String { file("hostile") }
    /// `backend/`: one ``BackendEvent`` log per backend group process; absent without backend groups.
    public var backendDirectory: String { file("backend") }
    public func backendLogFile(process: String) -> String {
        URL(fileURLWithPath: backendDirectory).appendingPathComponent("\(process).jsonl").path
    }
    public func hostileLogFile(process: String) -> String {
        URL(fileURLWithPath: hostileDirectory).appendingPathComponent("\(process).jsonl").path
    }

    public func historyFile(process: String) -> String {
        URL(fileURLWithPath: historyDirectory).appendingPathComponent("\(process).jsonl").path
    }
    public func logFile(process: String) -> String {
        URL(fileURLWithPath: logsDirectory).appendingPathComponent("\(process).log").path
    }
    public func outputFile(process: String) -> String {
        URL(fileURLWithPath: logsDirectory).appendingPathComponent("\(process).out").path
    }
    public func nodePlanFile(process: String) -> String {
        URL(fileURLWithPath: nodePlansDirectory).appendingPathComponent("\(process).json").path
    }
    public func deviceStore(device: String) -> String {
        URL(fileURLWithPath: devicesDirectory).appendingPathComponent("\(device).sqlite").path
    }

    /// Creates `root/<yyyyMMdd-HHmmss>` (with `-2`, `-3`… when that exists) and its
    /// sub-directories, and points `root/latest` at it.
    public static func create(root: String = "runs", now: Date = WallClock.system.now()) throws -> RunDirectory {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd-HHmmss"
        let stamp = formatter.string(from: now)
        let manager = FileManager.default
        try manager.createDirectory(atPath: root, withIntermediateDirectories: true)
        var name = stamp
        var attempt = 1
        while manager.fileExists(atPath: URL(fileURLWithPath: root).appendingPathComponent(name).path) {
            attempt += 1
            name = "\(stamp)-\(attempt)"
        }
        let run = RunDirectory(path: URL(fileURLWithPath: root).appendingPathComponent(name).path)
        for directory in [run.path, run.historyDirectory, run.logsDirectory, run.nodePlansDirectory, run.devicesDirectory] {
            try manager.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
        let latest = URL(fileURLWithPath: root).appendingPathComponent("latest").path
        try? manager.removeItem(atPath: latest)
        try manager.createSymbolicLink(atPath: latest, withDestinationPath: name)
        return run
    }
}
