import Foundation

// The scenario model: what a fleet run does. Scenario files are YAML
// (`ScenarioLoader` parses and validates them); this file is only the model, shared
// by the launcher, the node processes (through `NodePlan`) and the checker.
// Times are seconds (`Double`); YAML accepts "500ms", "10s", "2m".

/// A whole run: its seed, length, the coordinator, the device groups, the fault
/// schedule, and what must hold at the end.
public struct Scenario: Codable, Sendable, Hashable {
    /// The groups that attack (``DeviceGroup/hostile``), by name.
    public var hostileGroupNames: Set<String> { Set(groups.filter(\.isHostile).map(\.name)) }
    /// The groups whose processes run no signing devices (hostile and backend groups), by name:
    /// faults, node hosts and the fleet's device counts are the signing devices'.
    public var nonDeviceGroupNames: Set<String> { Set(groups.filter { !$0.runsDevices }.map(\.name)) }
    public var name: String
    /// Every random choice of the run (device behaviour, connectivity, fault targets,
    /// toxics) derives from it. `nil` in a file: the launcher picks one and prints it.
    public var seed: UInt64?
    /// How long devices generate work, in seconds; then the launcher heals and drains.
    public var duration: Double
    /// How long draining may take before the verdict becomes `unknown`.
    public var drainTimeout: Double
    /// Seconds over which the devices start their drain (`drain_ramp`): each at a moment drawn
    /// from its seed within this window, going on as before until then. 0: all at once.
    public var drainRamp: Double = 0
    /// Seconds over which the devices start (`start_ramp`): each begins (connects, logs in,
    /// composes) at a moment drawn from its seed within this window, so a large fleet does not
    /// connect in one instant. 0: each node process spreads its own devices over 2 ms apiece.
    public var startRamp: Double = 0
    public var coordinator: CoordinatorSettings
    /// Route device traffic through `signfleet proxy` (one proxy per node process).
    public var proxy: Bool
    public var groups: [DeviceGroup]
    public var faults: [FaultSpec]
    public var checks: Checks
    /// Machines (or network namespaces) that run some groups' node processes (``FleetHost``);
    /// empty: every process runs on the launcher's machine. docs/fleet.md, "Fleets across hosts".
    public var hosts: [FleetHost] = []

    public init(
        name: String, seed: UInt64? = nil, duration: Double, drainTimeout: Double = 60,
        coordinator: CoordinatorSettings = CoordinatorSettings(), proxy: Bool = false, groups: [DeviceGroup],
        faults: [FaultSpec] = [], checks: Checks = Checks()
    ) {
        self.name = name
        self.seed = seed
        self.duration = duration
        self.drainTimeout = drainTimeout
        self.coordinator = coordinator
        self.proxy = proxy
        self.groups = groups
        self.faults = faults
        self.checks = checks
    }
}

public struct CoordinatorSettings: Codable, Sendable, Hashable {
    /// Heartbeat interval in seconds.
    public var heartbeat: Double
    /// Per-account request budget per hour and burst, if limited.
    public var rateLimitHourly: Int?
    public var rateLimitBurst: Int?
    /// Unexpected exits the supervisor restarts before it gives up on the run (per coordinator).
    public var restartBudget: Int
    /// Where the coordinators keep their store.
    public var store: CoordinatorStoreChoice
    /// Coordinator processes serving the fleet on the one store (the scenario's top-level
    /// `coordinators`, 1…``maximumInstances``; more than one needs PostgreSQL).
    public var instances: Int

    public static let maximumInstances = 5

    public init(
        heartbeat: Double = 0.5, rateLimitHourly: Int? = nil, rateLimitBurst: Int? = nil, restartBudget: Int = 3,
        store: CoordinatorStoreChoice = .sqlite, instances: Int = 1
    ) {
        self.heartbeat = heartbeat
        self.rateLimitHourly = rateLimitHourly
        self.rateLimitBurst = rateLimitBurst
        self.restartBudget = restartBudget
        self.store = store
        self.instances = instances
    }

    /// The supervised process name of coordinator `number` (1-based): `coordinator`, then
    /// `coordinator-2`, `coordinator-3`, … (their logs are `logs/<name>.log`).
    public static func processName(_ number: Int) -> String { number <= 1 ? "coordinator" : "coordinator-\(number)" }

    /// Every coordinator's process name, in order.
    public var processNames: [String] { (1...max(1, instances)).map(Self.processName) }
}

extension Scenario {
    /// The coordinator processes a coordinator fault with `target` hits: the one it names, or every one.
    public func coordinatorTargets(_ target: FaultTarget) -> [String] {
        if let number = target.coordinator { return [CoordinatorSettings.processName(number)] }
        return coordinator.processNames
    }
}

/// The coordinator store of a fleet run (docs/scenarios.md, "`coordinator`").
public enum CoordinatorStoreChoice: Codable, Sendable, Hashable {
    /// `coordinator.sqlite` in the run directory (the default).
    case sqlite
    /// A throwaway PostgreSQL cluster the launcher makes in the run directory (`postgres/`).
    case postgres
    /// An existing PostgreSQL server; the run makes a fresh schema there.
    case postgresURL(String)

    public var isPostgres: Bool { self != .sqlite }
}

/// A group of identical devices spread over `processes` node processes.
public struct DeviceGroup: Codable, Sendable, Hashable {
    public var name: String
    public var count: Int
    /// Node processes hosting the group; devices are split into contiguous blocks.
    public var processes: Int
    public var behaviour: Behaviour
    public var connectivity: Connectivity
    /// Pen kinds (SignatureCapture `PenKind` names: applePencil, wacomBluetooth,
    /// signaturePad, finger) with relative weights.
    public var pens: [String: Double]
    /// Unexpected exits of one of this group's processes the supervisor restarts.
    public var restartBudget: Int
    /// Set for a group of attackers (``HostileSettings``): its devices sign nothing and are
    /// outside the verdict, which covers the honest groups; the report shows what they tried.
    public var hostile: HostileSettings?
    public var isHostile: Bool { hostile != nil }
    /// Set for a group of REST backends (``BackendSettings``): its members are integrations that
    /// drive the REST API, not devices; the checker judges the envelopes they create.
    public var backend: BackendSettings?
    /// Whether the group's processes run signing devices (neither hostile nor backends).
    public var runsDevices: Bool { hostile == nil && backend == nil }

    public init(
        name: String, count: Int, processes: Int = 1, behaviour: Behaviour = Behaviour(),
        connectivity: Connectivity = Connectivity(), pens: [String: Double] = ["applePencil": 1], restartBudget: Int = 5,
        hostile: HostileSettings? = nil
    ) {
        self.hostile = hostile
        self.name = name
        self.count = count
        self.processes = processes
        self.behaviour = behaviour
        self.connectivity = connectivity
        self.pens = pens
        self.restartBudget = restartBudget
    }
}

/// What each device of a group does.
public struct Behaviour: Codable, Sendable, Hashable {
    /// Poisson arrivals of new envelopes per device.
    public var envelopesPerMinute: Double
    /// Fraction of envelopes composed from a template (the rest from builders).
    public var templateFraction: Double
    public var inPersonSigners: IntRange
    public var remoteSigners: IntRange
    /// Fraction of remote signers that are embedded (captive signing) recipients.
    public var embeddedFraction: Double
    /// Seconds a signer takes to sign, uniformly drawn.
    public var signingDuration: ClosedSpan
    /// Probability that a composed envelope is cancelled (Finish Later / discarded) before signing.
    public var cancelRate: Double
    /// Probability that a signer declines instead of signing.
    public var declineRate: Double
    public var sync: SyncPolicy
    /// Stop composing after this many envelopes per device (nil: until the run ends).
    public var maxEnvelopes: Int?

    public init(
        envelopesPerMinute: Double = 6, templateFraction: Double = 0, inPersonSigners: IntRange = IntRange(1, 1),
        remoteSigners: IntRange = IntRange(0, 0), embeddedFraction: Double = 0,
        signingDuration: ClosedSpan = ClosedSpan(0.5, 2), cancelRate: Double = 0, declineRate: Double = 0,
        sync: SyncPolicy = .whenOnline, maxEnvelopes: Int? = nil
    ) {
        self.envelopesPerMinute = envelopesPerMinute
        self.templateFraction = templateFraction
        self.inPersonSigners = inPersonSigners
        self.remoteSigners = remoteSigners
        self.embeddedFraction = embeddedFraction
        self.signingDuration = signingDuration
        self.cancelRate = cancelRate
        self.declineRate = declineRate
        self.sync = sync
        self.maxEnvelopes = maxEnvelopes
    }
}

/// When an online device syncs its outbox.
public enum SyncPolicy: Codable, Sendable, Hashable {
    /// After every signing and whenever it comes back online.
    case whenOnline
    /// Every so many seconds while online.
    case every(Double)
    /// Only when told (the launcher's drain).
    case manual
}

/// A device's view of the network: when it believes it is offline it does not try
/// (as an app that checks reachability).
public struct Connectivity: Codable, Sendable, Hashable {
    public enum Model: Codable, Sendable, Hashable {
        case alwaysOnline
        /// Two-state (Gilbert–Elliott) Markov model: exponentially distributed stays
        /// with these means, in seconds.
        case gilbertElliott(onlineMean: Double, offlineMean: Double)
    }
    public var model: Model
    /// Probability that a device starts offline.
    public var startOffline: Double

    public init(model: Model = .alwaysOnline, startOffline: Double = 0) {
        self.model = model
        self.startOffline = startOffline
    }
}

/// An inclusive integer range, written `2` or `1..3` in YAML.
public struct IntRange: Codable, Sendable, Hashable {
    public var lower: Int
    public var upper: Int
    public init(_ lower: Int, _ upper: Int) {
        self.lower = lower
        self.upper = upper
    }
}

/// An inclusive range of seconds, written `2s` or `1s..5s` in YAML.
public struct ClosedSpan: Codable, Sendable, Hashable {
    public var lower: Double
    public var upper: Double
    public init(_ lower: Double, _ upper: Double) {
        self.lower = lower
        self.upper = upper
    }
}

/// One entry of the fault schedule: a fault that starts at `at` and ends `for`
/// seconds later (its stop half), optionally repeating `every` seconds until `until`.
/// Whatever is still active when the run's duration ends is healed.
/// YAML syntax and rules: docs/scenarios.md; `FaultSchedule` makes it concrete.
public struct FaultSpec: Codable, Sendable, Hashable {
    public var fault: Fault
    /// The first occurrence, seconds from the start (`at`, or `from` with `every`).
    public var at: Double
    /// How long the fault lasts (kill: downtime before the restart; pause: SIGSTOP to SIGCONT).
    /// Nil: until the run's end (the final heal); always nil for a template edit.
    public var duration: Double?
    /// Repeat interval; nil: once.
    public var every: Double?
    /// With `every`: no occurrence starts at or after this (nil: the run's end).
    public var until: Double?
    public var target: FaultTarget
    /// For `offline`: seconds over which the targets' devices come back after each occurrence
    /// (`return_ramp`; ``Outage/returnRamp``). Nil: all at the occurrence's end.
    public var returnRamp: Double?

    public init(
        fault: Fault, at: Double, duration: Double? = nil, every: Double? = nil, until: Double? = nil, target: FaultTarget = FaultTarget(),
        returnRamp: Double? = nil
    ) {
        self.fault = fault
        self.at = at
        self.duration = duration
        self.every = every
        self.until = until
        self.target = target
        // 0 is no ramp, as the loader reads `return_ramp: 0s`.
        self.returnRamp = returnRamp.flatMap { $0 > 0 ? $0 : nil }
    }
}

public enum Fault: Codable, Sendable, Hashable {
    /// SIGKILL node processes, restart them after the duration.
    case killNode
    /// SIGKILL the coordinator, restart it on the same store and endpoint.
    case killCoordinator
    /// SIGSTOP node processes, SIGCONT after the duration.
    case pauseNode
    case pauseCoordinator
    /// Devices of the target believe they are offline (a scheduled outage).
    case offline
    /// A proxy toxic on the target's proxies.
    case toxic(ToxicSpec)
    /// The target's proxies are disabled (connections refused and cut).
    case partition
    /// Edit a template on the coordinator (devices must re-cache it).
    case templateEdit(template: String)
    /// Stop the coordinator (SIGKILL), replace its store with the copy the launcher took `snapshot`
    /// seconds into the run (an online backup), and start it again after the duration: a store
    /// restored from an older backup, which the devices heal (docs/sync.md).
    case restoreCoordinator(snapshot: Double)
    /// Stop the target node processes (SIGKILL), replace each of their devices' stores with the copy
    /// the launcher took `snapshot` seconds into the run (an online backup), and start them again
    /// after the duration: phones whose storage went back in time. What the devices signed after
    /// the copy and had not synced is gone with it; the checker counts it, and checks that nothing
    /// signed after the restore is lost (docs/checker.md).
    case restoreNode(snapshot: Double)
    /// Stop the run's PostgreSQL server (`crash`: SIGKILL of the postmaster, a crash its restart
    /// recovers from; otherwise a fast shutdown) and start it again on the same data directory
    /// and port after the duration. Needs `coordinator: {store: postgres}`.
    case restartPostgres(crash: Bool)
    /// Take a host's network link down (its ``FleetHost/linkDown`` command) and up again after the
    /// duration (``FleetHost/linkUp``): every node process there loses the coordinator at once.
    case partitionHost(host: String)
}

/// Which processes or devices a fault hits: a group (or all groups), and a fraction
/// or a count of its processes, drawn with the run's seed.
public struct FaultTarget: Codable, Sendable, Hashable {
    public var group: String?
    public var fraction: Double?
    public var count: Int?
    /// For coordinator faults: which coordinator (1-based, as in ``CoordinatorSettings/processName(_:)``);
    /// nil: every coordinator.
    public var coordinator: Int?

    public init(group: String? = nil, fraction: Double? = nil, count: Int? = nil, coordinator: Int? = nil) {
        self.group = group
        self.fraction = fraction
        self.count = count
        self.coordinator = coordinator
    }
}

/// A Toxiproxy toxic: `type` is latency, bandwidth, slow_close, timeout, reset_peer,
/// slicer or limit_data; attributes as Toxiproxy names them.
public struct ToxicSpec: Codable, Sendable, Hashable {
    public var type: String
    /// "upstream" (device to coordinator) or "downstream".
    public var stream: String
    public var toxicity: Double
    public var attributes: [String: Double]

    public init(type: String, stream: String = "downstream", toxicity: Double = 1, attributes: [String: Double] = [:]) {
        self.type = type
        self.stream = stream
        self.toxicity = toxicity
        self.attributes = attributes
    }
}

/// What must hold at the end.
public struct Checks: Codable, Sendable, Hashable {
    /// Expected verdict (a test scenario may expect `invalid`).
    public var verdict: CheckVerdict
    /// Thresholds on the summary, e.g. `syncAck.p99 < 1s`, `pending == 0`.
    public var thresholds: [String]

    public init(verdict: CheckVerdict = .valid, thresholds: [String] = []) {
        self.verdict = verdict
        self.thresholds = thresholds
    }

    /// The expected verdict as text, as before it was a ``CheckVerdict``: a text that names no
    /// verdict expects ``CheckVerdict/unknown``.
    @available(*, deprecated, message: "pass a CheckVerdict (.valid, .invalid, .unknown)")
    public init(verdict: String, thresholds: [String] = []) {
        self.init(verdict: CheckVerdict(rawValue: verdict) ?? .unknown, thresholds: thresholds)
    }
}

/// A machine, or a network namespace, that runs the node processes of some groups
/// (docs/fleet.md, "Fleets across hosts"). The launcher runs every command for it as
/// `launch + [command…]`, an argv list (never a shell line built from the scenario), e.g.
/// `[ssh, -o, BatchMode=yes, fleet@10.0.0.7]` or `[ip, netns, exec, sf-a]`.
public struct FleetHost: Codable, Sendable, Hashable {
    /// How the launcher's signals reach the node processes there.
    public enum Signals: String, Codable, Sendable, Hashable {
        /// To the launched process's group on this machine: for prefixes that run the node in place
        /// (`ip netns exec`, `nsenter`, `chroot`).
        case local
        /// As `launch + [kill, -s, NAME, PID]` with the pid the node announced (`node started … pid=N`):
        /// for prefixes whose local process is not the node (`ssh`).
        case remote
    }

    /// 1–32 of a-z 0-9 _ (a partition fault names it).
    public var name: String
    /// The argv prefix that runs a command there.
    public var launch: [String]
    /// The host name or address the coordinator is reached at from there (the launcher adds the port).
    public var coordinatorAddress: String
    /// An absolute directory there; each run uses `<directory>/<run directory's name>/` (plans, histories,
    /// device stores), gathered back into the run directory at the end.
    public var directory: String
    /// The groups whose node processes run there (a group runs on one host).
    public var groups: [String]
    /// The `signfleet` binary there; nil: the launcher's own path.
    public var executable: String?
    public var signals: Signals
    /// Run on the launcher's machine to take this host's link down and up (`partition: {host: …}`).
    public var linkDown: [String]?
    public var linkUp: [String]?

    public init(
        name: String, launch: [String], coordinatorAddress: String, directory: String, groups: [String], executable: String? = nil,
        signals: Signals = .local, linkDown: [String]? = nil, linkUp: [String]? = nil
    ) {
        self.name = name
        self.launch = launch
        self.coordinatorAddress = coordinatorAddress
        self.directory = directory
        self.groups = groups
        self.executable = executable
        self.signals = signals
        self.linkDown = linkDown
        self.linkUp = linkUp
    }
}

extension Scenario {
    /// The host a group's node processes run on; nil: the launcher's machine.
    public func host(ofGroup group: String) -> FleetHost? { hosts.first { $0.groups.contains(group) } }
}
