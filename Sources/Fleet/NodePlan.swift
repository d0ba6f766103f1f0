import Foundation

/// What one `signfleet node --plan <file>` process runs: written as JSON by the
/// launcher into `nodes/<process>.json`, read by the node at start and again after a
/// restart (the devices then find their stores and carry on).
///
/// The contract between launcher and node:
/// - at start the node prints `node started process=<process> devices=<n> endpoint=<endpoint> pid=<pid>`
///   (the pid is what the launcher signals on a node host with remote signals, ``FleetHost/Signals/remote``);
/// - the node appends its devices' operations to `historyFile` (``HistoryWriter``);
/// - every `statsInterval` seconds it prints one line `stats <NodeStats JSON>` on stdout;
/// - on SIGUSR1 it drains: stops composing, treats every device as online (each from its
///   seeded moment within `drainRamp`, when set), syncs until every outbox is empty, prints
///   `drained` and exits 0;
/// - on SIGTERM/SIGINT it stops at once, cleanly; SIGKILL may come at any time.
public struct NodePlan: Codable, Sendable, Hashable {
    /// The process name, `node-<group>-<n>`.
    public var process: String
    public var group: String
    /// The coordinator's endpoint, or this process's fault-proxy listener.
    public var endpoint: String
    /// The other coordinators of a run with several (`coordinators: N`): each device fails over
    /// between ``endpoint`` and these (`FleetClientConfiguration.failoverEndpoints`), starting at
    /// one chosen by its place in ``devices`` so that every coordinator serves devices. Absent: one coordinator.
    public var failoverEndpoints: [String]?
    /// Where the devices' SQLite files live (`<device>.sqlite`).
    public var dataDirectory: String
    public var historyFile: String
    /// The run's start (seconds since the Unix epoch); outages are relative to it.
    public var runStart: Double
    /// How long the run generates work, in seconds from `runStart`.
    public var duration: Double
    /// The scenario's `drain_ramp`: on SIGUSR1 each device starts draining after a delay drawn
    /// from its seed in [0, drainRamp) seconds (`DeviceStateMachine`). Absent: 0, all at once.
    public var drainRamp: Double?
    /// The scenario's `start_ramp`: each device starts after a delay drawn from its seed in
    /// [0, startRamp) seconds from `runStart`. Absent: up to 2 ms per device of the process.
    public var startRamp: Double?
    public var email: String
    public var secret: String
    public var devices: [DevicePlan]
    public var behaviour: Behaviour
    public var connectivity: Connectivity
    public var pens: [String: Double]
    /// Scheduled outages for this process's devices, relative to `runStart`.
    public var outages: [Outage]
    public var statsInterval: Double
    public var requestTimeout: Double
    /// The coordinator's CURVE public key in Z85 (``RunDirectory/coordinatorPublicKeyFile``),
    /// which every device pins; absent: the coordinator serves plain TCP.
    public var serverKey: String?
    /// Set for a process of a hostile group: its devices attack (`HostileDevice`) instead of signing.
    public var hostile: HostilePlan?
    /// Set for a process of a backend group: its members drive the REST API (`BackendWorker`).
    public var backend: BackendPlan?
    /// The nice value (0–19) the node process runs at (``ProcessPriority``); absent or 0: unchanged.
    /// The launcher gives `--node-nice` (default 10), so the devices never starve the coordinator.
    public var niceness: Int?

    public init(
        process: String, group: String, endpoint: String, dataDirectory: String, historyFile: String, runStart: Double,
        duration: Double, email: String = "user1@demo.example", secret: String = "demo-secret", devices: [DevicePlan],
        behaviour: Behaviour, connectivity: Connectivity, pens: [String: Double], outages: [Outage] = [],
        statsInterval: Double = 1, requestTimeout: Double = 1, serverKey: String? = nil, hostile: HostilePlan? = nil
    ) {
        self.hostile = hostile
        self.serverKey = serverKey
        self.process = process
        self.group = group
        self.endpoint = endpoint
        self.dataDirectory = dataDirectory
        self.historyFile = historyFile
        self.runStart = runStart
        self.duration = duration
        self.email = email
        self.secret = secret
        self.devices = devices
        self.behaviour = behaviour
        self.connectivity = connectivity
        self.pens = pens
        self.outages = outages
        self.statsInterval = statsInterval
        self.requestTimeout = requestTimeout
    }
}

public struct DevicePlan: Codable, Sendable, Hashable {
    /// `<group>-<n>`, also its ZeroMQ routing id and store file name.
    public var id: String
    /// Every random choice of this device derives from it.
    public var seed: UInt64

    public init(id: String, seed: UInt64) {
        self.id = id
        self.seed = seed
    }
}

/// A window, in seconds relative to the run's start, during which devices are offline.
public struct Outage: Codable, Sendable, Hashable {
    public var start: Double
    public var end: Double
    /// Seconds over which the devices come back after `end` (the fault's `return_ramp`): each
    /// device at its own seeded moment in `[end, end + returnRamp)`, as phones notice a network
    /// that is back at their own moments. Nil or 0: every device at `end`.
    public var returnRamp: Double?

    public init(start: Double, end: Double, returnRamp: Double? = nil) {
        self.start = start
        self.end = end
        self.returnRamp = returnRamp
    }
}

/// A node's periodic report (`stats {json}` on stdout); the launcher sums them for
/// its progress line and the report's timeline.
public struct NodeStats: Codable, Sendable, Hashable {
    public var time: Double
    public var devices: Int
    public var online: Int
    public var offline: Int
    public var composed: Int
    public var signed: Int
    public var cancelled: Int
    public var declined: Int
    public var synced: Int
    /// Outbox items not yet acknowledged.
    public var pending: Int
    public var syncFailures: Int
    /// Sync-ack latency percentiles over the last interval, in seconds (nil: none).
    public var syncAckP50: Double?
    public var syncAckP99: Double?
    /// Captive signing ceremonies completed (embedded remote signers); absent from older nodes.
    public var captive: Int?

    public init(
        time: Double, devices: Int, online: Int, offline: Int, composed: Int, signed: Int, cancelled: Int = 0,
        declined: Int = 0, synced: Int, pending: Int, syncFailures: Int = 0, syncAckP50: Double? = nil,
        syncAckP99: Double? = nil, captive: Int? = nil
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
        self.captive = captive
    }

    /// The stdout line prefix.
    public static let linePrefix = "stats "
}
