import Foundation

// Hostile device groups (docs/scenarios.md, "Hostile groups"): attackers that run beside the
// honest fleet, each doing one kind of attack against a target group's devices, and record every
// attempt with what the coordinator answered. This file is the model shared by the scenario, the
// launcher, the hostile node processes, the checker and the report.

/// One kind of attack.
public enum HostileBehaviour: String, Codable, Sendable, Hashable, CaseIterable {
    /// Acts as honest devices with its own keys: asks for their `sync.results` from an unknown key,
    /// names its connection after them (a routing id), and enrolls their ids in their account with
    /// new keys once they are enrolled.
    case impersonate
    /// Pushes garbage items at honest devices' next sequence numbers, from an unknown key and from
    /// its own enrolled key.
    case junkPush = "junk_push"
    /// Floods requests and never reads a reply.
    case slowReader = "slow_reader"
    /// Re-sends honest devices' signed items (as if captured: read from the coordinator's store) as
    /// pushes of its own connections.
    case replay
    /// Enrolls honest devices' ids in another account (the run's rival account), early.
    case squat
}

/// A hostile group's settings in a scenario.
public struct HostileSettings: Codable, Sendable, Hashable {
    /// The honest group whose devices are attacked.
    public var target: String
    /// Device n of the group does `behaviours[(n - 1) % behaviours.count]`.
    public var behaviours: [HostileBehaviour]
    /// Seconds between two attempts of one hostile device.
    public var every: Double
    /// Requests each slow reader sends (and never reads the answers to).
    public var slowReaderMessages: Int

    public init(target: String, behaviours: [HostileBehaviour] = HostileBehaviour.allCases, every: Double = 1, slowReaderMessages: Int = 20_000) {
        self.target = target
        self.behaviours = behaviours
        self.every = every
        self.slowReaderMessages = slowReaderMessages
    }

    /// The behaviour of device number `number` (1-based) of the group.
    public func behaviour(ofDeviceNumber number: Int) -> HostileBehaviour {
        behaviours[(max(1, number) - 1) % max(1, behaviours.count)]
    }
}

/// What a hostile node process needs beyond ``NodePlan``'s common fields (its `devices` are the
/// attackers; `email`/`secret` are the honest account's, which an insider knows).
public struct HostilePlan: Codable, Sendable, Hashable {
    /// Each attacker's behaviour, by device id (this process's attackers).
    public var behaviours: [String: HostileBehaviour]
    /// Every `squat` attacker of the group, in every process, in order: they share the targets.
    public var squatters: [String]
    /// The honest devices under attack.
    public var targets: [String]
    /// Where the honest devices' stores are (read-only: their next sequence numbers, whether they
    /// have synced).
    public var targetStores: String
    /// The coordinator's store (read-only): the honest devices' signed items as they were sent,
    /// which the `replay` attackers re-send as if captured.
    public var capturedItemsStore: String
    /// `hostile/<process>.jsonl`: one ``HostileAttempt`` per line.
    public var logFile: String
    public var every: Double
    public var slowReaderMessages: Int
    /// The rival account's user: the attackers enroll their own ids (and squatted ones) there.
    public var rivalEmail: String
    public var rivalSecret: String

    public init(
        behaviours: [String: HostileBehaviour], squatters: [String] = [], targets: [String], targetStores: String,
        capturedItemsStore: String, logFile: String, every: Double, slowReaderMessages: Int, rivalEmail: String, rivalSecret: String
    ) {
        self.squatters = squatters
        self.capturedItemsStore = capturedItemsStore
        self.behaviours = behaviours
        self.targets = targets
        self.targetStores = targetStores
        self.logFile = logFile
        self.every = every
        self.slowReaderMessages = slowReaderMessages
        self.rivalEmail = rivalEmail
        self.rivalSecret = rivalSecret
    }
}

/// The account the launcher creates for a run with hostile groups (docs/scenarios.md).
public enum RivalAccount {
    public static let id = "rival"
    public static let name = "Rival Co"
    public static let email = "mallory@rival.example"
}

/// One line of `hostile/<process>.jsonl`: what an attacker tried and what it got.
public struct HostileAttempt: Codable, Sendable, Hashable {
    /// Seconds since the Unix epoch.
    public var time: Double
    /// The attacker's device id.
    public var device: String
    public var behaviour: HostileBehaviour
    /// What exactly was tried, e.g. `results_as_target`, `enroll_target_id_with_new_keys`, `push_junk_unknown_key`.
    public var action: String
    /// The honest device id attacked (nil for a flood).
    public var target: String?
    /// `ok` when the coordinator did what was asked, an error code (`forbidden`, `unauthenticated`,
    /// `invalid_request`, …), `no_reply`, or for a flood `sent`.
    public var result: String
    /// True when the coordinator did something it must refuse to an attacker: the attack worked.
    public var breach: Bool
    public var detail: String?

    public init(
        time: Double, device: String, behaviour: HostileBehaviour, action: String, target: String?, result: String, breach: Bool,
        detail: String? = nil
    ) {
        self.time = time
        self.device = device
        self.behaviour = behaviour
        self.action = action
        self.target = target
        self.result = result
        self.breach = breach
        self.detail = detail
    }
}

/// Per behaviour and action: how many attempts, their results, and the breaches; what the report
/// and `summary.json` show.
public struct HostileTally: Codable, Sendable, Hashable {
    public struct Line: Codable, Sendable, Hashable {
        public var behaviour: HostileBehaviour
        public var action: String
        public var attempts: Int
        /// Result → count.
        public var results: [String: Int]
        public var breaches: Int
    }

    public var lines: [Line]
    public var attempts: Int { lines.reduce(0) { $0 + $1.attempts } }
    public var breaches: Int { lines.reduce(0) { $0 + $1.breaches } }

    public init(_ attempts: [HostileAttempt]) {
        var byKey: [String: Line] = [:]
        for attempt in attempts {
            let key = "\(attempt.behaviour.rawValue) \(attempt.action)"
            var line = byKey[key] ?? Line(behaviour: attempt.behaviour, action: attempt.action, attempts: 0, results: [:], breaches: 0)
            line.attempts += 1
            line.results[attempt.result, default: 0] += 1
            if attempt.breach { line.breaches += 1 }
            byKey[key] = line
        }
        lines = byKey.keys.sorted().compactMap { byKey[$0] }
    }
}

/// Reads `hostile/<process>.jsonl` files (bounded as histories are, ``HistoryReader``).
public enum HostileLog {
    /// Every attempt in the `*.jsonl` files of `directory` (none when it does not exist), by time,
    /// and the files whose partial last line (a writer killed mid-write) was skipped. Any other
    /// unreadable line is an error.
    public static func read(directory: String) throws -> (attempts: [HostileAttempt], truncatedFiles: [String]) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return ([], []) }
        var attempts: [HostileAttempt] = []
        var truncated: [String] = []
        for name in names.sorted() where name.hasSuffix(".jsonl") {
            let path = URL(fileURLWithPath: directory).appendingPathComponent(name).path
            guard let data = FileManager.default.contents(atPath: path) else { throw HistoryError.cannotOpen(path: path) }
            let contents = try HistoryReader.parseLines(data, path: path, as: HostileAttempt.self)
            attempts += contents.lines
            if contents.truncatedTail { truncated.append(name) }
        }
        return (attempts.sorted { $0.time < $1.time }, truncated)
    }
}
