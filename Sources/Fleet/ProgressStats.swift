import Foundation

/// One sample of the whole fleet, as the launcher saw it: the node processes'
/// latest `stats` lines summed. Appended to `timeline.jsonl` once per tick; the
/// report's plots are drawn from these.
public struct TimelineSample: Codable, Sendable, Hashable {
    /// Seconds since the run's start.
    public var time: Double
    public var devices: Int
    public var online: Int
    /// Offline devices, including those of node processes that are down or paused.
    public var offline: Int
    public var composed: Int
    public var signed: Int
    public var cancelled: Int
    public var declined: Int
    public var synced: Int
    /// Outbox items not yet acknowledged (the outbox depth).
    public var pending: Int
    public var syncFailures: Int
    /// Median of the nodes' sync-ack p50 over their last interval, in seconds.
    public var syncAckP50: Double?
    /// The worst node's sync-ack p99 over its last interval, in seconds.
    public var syncAckP99: Double?
    /// Faults active at this moment (their labels).
    public var activeFaults: [String]

    public init(
        time: Double, devices: Int = 0, online: Int = 0, offline: Int = 0, composed: Int = 0, signed: Int = 0,
        cancelled: Int = 0, declined: Int = 0, synced: Int = 0, pending: Int = 0, syncFailures: Int = 0,
        syncAckP50: Double? = nil, syncAckP99: Double? = nil, activeFaults: [String] = []
    ) {
        self.time = time
        self.devices = devices
        self.online = online
        self.offline = offline
        self.composed = composed
        self.signed = signed
        self.cancelled = cancelled
        self.declined = declined
        self.synced = synced
        self.pending = pending
        self.syncFailures = syncFailures
        self.syncAckP50 = syncAckP50
        self.syncAckP99 = syncAckP99
        self.activeFaults = activeFaults
    }
}

/// Sums the node processes' `stats` lines into fleet-wide figures.
///
/// A node's counters start again from zero when its process restarts (after a
/// kill -9): a counter that goes down is taken as a restart, and what the process
/// had counted before is kept as a base, so the fleet's totals never go backwards.
/// A process that is down or paused counts all its devices as offline.
public struct FleetStatsAggregator: Sendable {
    private struct Counters: Sendable {
        var composed = 0, signed = 0, cancelled = 0, declined = 0, synced = 0, syncFailures = 0
    }

    private struct ProcessState: Sendable {
        var devices: Int
        var latest: NodeStats?
        var base = Counters()
        var fresh = false
        var unavailable = false
    }

    private var processes: [String: ProcessState] = [:]

    /// - Parameter devicesPerProcess: every node process and how many devices it hosts.
    public init(devicesPerProcess: [String: Int]) {
        for (name, devices) in devicesPerProcess {
            processes[name] = ProcessState(devices: devices)
        }
    }

    /// Takes one `stats` line's figures from `process`.
    public mutating func record(_ stats: NodeStats, from process: String) {
        var state = processes[process] ?? ProcessState(devices: stats.devices)
        if let last = state.latest {
            // Any cumulative counter going down means a new process; keep what the old one counted.
            if stats.composed < last.composed || stats.signed < last.signed || stats.synced < last.synced {
                state.base.composed += last.composed
                state.base.signed += last.signed
                state.base.cancelled += last.cancelled
                state.base.declined += last.declined
                state.base.synced += last.synced
                state.base.syncFailures += last.syncFailures
            }
        }
        state.latest = stats
        state.fresh = true
        state.devices = stats.devices
        processes[process] = state
    }

    /// Marks a process down or paused (its devices count offline) or back.
    public mutating func setUnavailable(_ process: String, _ unavailable: Bool) {
        processes[process]?.unavailable = unavailable
    }

    /// The fleet now, `time` seconds after the run's start.
    public mutating func sample(time: Double, activeFaults: [String]) -> TimelineSample {
        var sample = TimelineSample(time: time, activeFaults: activeFaults)
        var p50s: [Double] = []
        var worstP99: Double?
        for name in processes.keys {
            guard var state = processes[name] else { continue }
            sample.devices += state.devices
            let latest = state.latest
            sample.composed += state.base.composed + (latest?.composed ?? 0)
            sample.signed += state.base.signed + (latest?.signed ?? 0)
            sample.cancelled += state.base.cancelled + (latest?.cancelled ?? 0)
            sample.declined += state.base.declined + (latest?.declined ?? 0)
            sample.synced += state.base.synced + (latest?.synced ?? 0)
            sample.syncFailures += state.base.syncFailures + (latest?.syncFailures ?? 0)
            sample.pending += latest?.pending ?? 0
            if state.unavailable || latest == nil {
                sample.offline += state.devices
            } else if let latest {
                sample.online += latest.online
                sample.offline += state.devices - latest.online
            }
            // Latencies only from lines that arrived since the previous sample.
            if state.fresh, let latest {
                if let p50 = latest.syncAckP50 { p50s.append(p50) }
                if let p99 = latest.syncAckP99 { worstP99 = max(worstP99 ?? 0, p99) }
            }
            state.fresh = false
            processes[name] = state
        }
        if !p50s.isEmpty {
            p50s.sort()
            sample.syncAckP50 = p50s[p50s.count / 2]
        }
        sample.syncAckP99 = worstP99
        return sample
    }
}
