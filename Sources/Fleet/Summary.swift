import Foundation
import Thresholds

/// A fault the launcher applied, with its window (seconds since the run's start).
public struct AppliedFault: Codable, Sendable, Hashable {
    /// `kill-node`, `pause-coordinator`, `toxic latency`, `partition`, …
    public var kind: String
    /// Processes (or proxies) it hit.
    public var targets: [String]
    public var start: Double
    /// When it was stopped (healed); nil while active.
    public var end: Double?

    public init(kind: String, targets: [String], start: Double, end: Double? = nil) {
        self.kind = kind
        self.targets = targets
        self.start = start
        self.end = end
    }

    /// How the progress line and the report name it (numbered processes in ranges:
    /// `offline node-rural-1…16`).
    public var label: String {
        targets.isEmpty ? kind : "\(kind) \(ProcessNames.compact(targets))"
    }
}

/// `summary.json`: what a run did and how it ended.
public struct RunSummary: Codable, Sendable, Hashable {
    public struct Counts: Codable, Sendable, Hashable {
        public var composed = 0, signed = 0, cancelled = 0, declined = 0, synced = 0, pending = 0, syncFailures = 0
        public init() {}
    }

    public struct Latency: Codable, Sendable, Hashable {
        /// Completed syncs measured (invoke to ok in the devices' histories).
        public var samples: Int
        /// Seconds.
        public var p50: Double?
        public var p99: Double?
        public var max: Double?

        public init(samples: Int, p50: Double?, p99: Double?, max: Double?) {
            self.samples = samples
            self.p50 = p50
            self.p99 = p99
            self.max = max
        }

        /// The latencies' count, p50, p99 and maximum (seconds).
        public init(_ seconds: [Double]) {
            samples = seconds.count
            p50 = SyncLatency.percentile(seconds, 0.5)
            p99 = SyncLatency.percentile(seconds, 0.99)
            max = seconds.max()
        }
    }

    public struct Durations: Codable, Sendable, Hashable {
        /// Seconds of generated work (the scenario's duration, or less when interrupted).
        public var run: Double
        /// Seconds from the heal to the last node drained (or the drain timeout).
        public var drain: Double
        /// Seconds from start to the verdict.
        public var total: Double
    }

    public var scenario: String
    public var seed: UInt64
    public var replay: String
    public var runDirectory: String
    /// Seconds since the Unix epoch.
    public var startedAt: Double
    public var durations: Durations
    public var devices: Int
    public var nodeProcesses: Int
    public var counts: Counts
    /// Per second of `durations.run`.
    public var signedPerSecond: Double
    public var syncedPerSecond: Double
    public var syncAck: Latency
    /// ``syncAck`` of the syncs started before the drain (while the scenario ran, faults and all).
    public var syncAckRun: Latency?
    /// ``syncAck`` of the syncs started in the drain (after the final heal): every device comes
    /// online at once, a burst of the launcher's making, not the scenario's.
    public var syncAckDrain: Latency?
    public var faults: [AppliedFault]
    public var restarts: [String: Int]
    public var totalRestarts: Int
    /// Processes whose restart budget ran out.
    public var exhausted: [String]
    /// Node processes that printed `drained` before the drain timeout.
    public var drained: Int
    public var interrupted: Bool
    /// The run's verdict: the checker's, made ``CheckVerdict/unknown`` when the launcher cannot vouch
    /// for the run (docs/fleet.md, "Exit codes"). In summary.json it is the text `valid`, `invalid`
    /// or `unknown`, as it was when this field was a `String`.
    public var verdict: CheckVerdict
    public var anomalies: Int
    /// Why the verdict is unknown, when it is.
    public var notes: [String]
    /// Anomalies by the checker's kind (`lost`, `order-violation`, …, as in check.json).
    public var anomalyKinds: [String: Int] = [:]
    /// The scenario's `checks.verdict`: the verdict it expects (summary.json: its text).
    public var expectedVerdict: CheckVerdict = .valid
    /// Each of the scenario's `checks.thresholds`: the text, the value observed (in the
    /// metric's unit: a count, seconds, or per second; null without samples), passed.
    public var thresholds: [ThresholdResult] = []
    /// The verdict is the expected one and every threshold held.
    public var checksPassed = true
    /// Hostile groups' attempts per behaviour and action, and what they got (absent without hostile groups).
    public var hostile: HostileTally?
}

public enum SyncLatency {
    /// One measured sync: when its `invoke` was recorded (seconds since the epoch) and how long
    /// until its `ok`.
    public struct Sample: Sendable, Hashable {
        public var start: Double
        public var seconds: Double
    }

    /// Sync-ack latencies (seconds) from device histories: each `sync` `ok` paired
    /// with the latest `sync` `invoke` of the same device before it.
    public static func latencies(in events: [HistoryEvent]) -> [Double] {
        samples(in: events).map(\.seconds)
    }

    /// ``latencies(in:)`` with each one's start.
    public static func samples(in events: [HistoryEvent]) -> [Sample] {
        var openInvokes: [String: Double] = [:]
        var result: [Sample] = []
        for event in events where event.op == .sync {
            guard let device = event.device else { continue }
            switch event.type {
            case .invoke: openInvokes[device] = event.time
            case .ok:
                if let start = openInvokes.removeValue(forKey: device) { result.append(Sample(start: start, seconds: max(0, event.time - start))) }
            case .fail, .info: openInvokes.removeValue(forKey: device)
            }
        }
        return result
    }

    /// When the drain began: the launcher's final `heal` (`nil` for a run that did not get there).
    public static func drainStart(in events: [HistoryEvent]) -> Double? {
        events.last { $0.process == "launcher" && $0.op == .heal && $0.details?["phase"] == "final" }?.time
    }

    /// The `q` quantile (0…1) of `values` by the nearest-rank method; nil when empty.
    public static func percentile(_ values: [Double], _ q: Double) -> Double? {
        guard !values.isEmpty else { return nil }
        let sorted = values.sorted()
        let rank = Int((q * Double(sorted.count)).rounded(.up))
        return sorted[min(sorted.count - 1, max(0, rank - 1))]
    }
}
