import Chaos
import Coordinator
import FleetProtocol
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The checker's answer as the launcher uses it.
public struct CheckOutcome: Sendable {
    /// The checker's verdict (``CheckVerdict/unknown`` when it could not run).
    public var verdict: CheckVerdict
    public var anomalies: [ReportAnomaly]
    /// Why the checker could not decide, if it could not.
    public var notes: [String]
    /// What the checker counted in the stores (nil when it could not run).
    public var counts: CheckCounts?

    public init(verdict: CheckVerdict, anomalies: [ReportAnomaly] = [], notes: [String] = [], counts: CheckCounts? = nil) {
        self.counts = counts
        self.verdict = verdict
        self.anomalies = anomalies
        self.notes = notes
    }

    /// The verdict as text, as before it was a ``CheckVerdict``: a text that names no verdict is
    /// ``CheckVerdict/unknown``.
    @available(*, deprecated, message: "pass a CheckVerdict (.valid, .invalid, .unknown)")
    public init(verdict: String, anomalies: [ReportAnomaly] = [], notes: [String] = [], counts: CheckCounts? = nil) {
        self.init(verdict: CheckVerdict(rawValue: verdict) ?? .unknown, anomalies: anomalies, notes: notes, counts: counts)
    }
}

/// Everything a fleet run needs, decided before it starts.
public struct LauncherConfiguration: Sendable {
    /// The `signfleet` binary every child runs.
    public var executable: String
    /// The scenario with its seed filled in.
    public var scenario: Scenario
    public var seed: UInt64
    /// The scenario file's text with its seed, written to the run directory.
    public var scenarioText: String
    public var plan: LaunchPlan
    /// Where `runs/<time>` is created.
    public var runsRoot: String
    /// The command that replays this run.
    public var replay: String
    /// Runs the checker on the finished run directory (and writes check.json).
    public var check: @Sendable (RunDirectory) async -> CheckOutcome
    /// Seconds between timeline samples.
    public var tick: Double = 1
    /// Seconds between progress lines when standard error is not a terminal.
    public var progressInterval: Double = 5
    /// How long a child may take to announce itself (`listening`, `api`, first stats).
    public var startTimeout: Double = 60
    /// SIGTERM to SIGKILL when stopping the coordinator, the proxy and what did not drain.
    public var stopGrace: Double = 5
    /// The nice value of every node process (``NodePlan/niceness``): the coordinator keeps the
    /// CPU it needs on a machine the devices share with it. 0 runs them at the launcher's priority.
    /// 19, the lowest: the scheduler weighs threads, and forty node processes' threads at nice 10
    /// still outweighed the coordinator's at 10,000 devices (docs/performance.md, "Overload
    /// without a storm": median p99 6.3 s at nice 10, 2.3 s at nice 19, same seeds).
    public var nodeNiceness = 19
    /// The run's wall-clock time: the schedule is in seconds since `runStart`, an epoch time the
    /// node processes share through their plans, and the report's times are read from it.
    public var wall: WallClock = .system
    /// What the launcher's waits sleep on (between schedule events, for a child's announcement).
    public var clock: any FleetClock = ContinuousClock()

    public init(
        executable: String, scenario: Scenario, seed: UInt64, scenarioText: String, plan: LaunchPlan, runsRoot: String,
        replay: String, check: @escaping @Sendable (RunDirectory) async -> CheckOutcome
    ) {
        self.executable = executable
        self.scenario = scenario
        self.seed = seed
        self.scenarioText = scenarioText
        self.plan = plan
        self.runsRoot = runsRoot
        self.replay = replay
        self.check = check
    }
}

/// How a run ended.
public struct LaunchResult: Sendable {
    public var run: RunDirectory
    public var summary: RunSummary
    /// ``RunChecks/exitCode(_:)``: 0 checks passed, 1 invalid, 2 unknown, 3 checks failed.
    public var exitCode: Int32
}

public enum LauncherError: Error, CustomStringConvertible {
    case childDidNotStart(process: String, waitingFor: String, logFile: String)
    case proxySetup(String)
    case hostileSetup(String)
    case adminRequest(String)
    case postgres(String)

    public var description: String {
        switch self {
        case .childDidNotStart(let process, let what, let log):
            return "\(process) did not announce `\(what)` in time (see \(log))"
        case .proxySetup(let message): return "fault proxy setup failed: \(message)"
        case .hostileSetup(let message): return "setting up the hostile groups failed: \(message)"
        case .adminRequest(let message): return "the coordinator's admin API refused: \(message)"
        case .postgres(let message): return "the run's PostgreSQL: \(message)"
        }
    }
}

/// `signfleet fleet run`: starts the coordinator, the fault proxy and the node
/// processes under a ``Supervisor``, applies the fault schedule at its times
/// (recording each as invoke/ok in `history/launcher.jsonl`), shows live progress,
/// then heals, drains, stops everything, runs the checker and writes the run
/// directory's summary and report. See docs/fleet.md.
public final class Launcher: Sendable {
    let configuration: LauncherConfiguration
    public let run: RunDirectory
    let supervisor: Supervisor
    let state: LauncherState
    let history: HistoryWriter
    let adminToken: String
    private let interruptedFlag = Mutex(false)
    let mutable: Mutex<Mutable>

    struct Mutable {
        var progress: ProgressLine
        var proxyClient: FaultProxyClient?
        /// The (first) coordinator's ZeroMQ endpoint once known.
        var coordinatorEndpoint: String?
        /// Every coordinator's endpoint, in order (``CoordinatorSettings/processNames``).
        var coordinatorEndpoints: [String] = []
        /// The store every coordinator opens: the run's `coordinator.sqlite`, or a PostgreSQL URL with its schema.
        var storeLocation: String?
        /// The run's PostgreSQL postmaster while it runs (its process group is every server process).
        var postmaster: Int32?
        /// The coordinator's CURVE public key (Z85); nil when it serves plain TCP.
        var coordinatorPublicKey: String?
        /// Active faults by their schedule id.
        var active: [String: AppliedFault] = [:]
        var applied: [AppliedFault] = []
        var runStart: Double = 0
        var templateEdits = 0
        /// When each device's copy for a `restore_node` was begun, by fault id then device (seconds since 1970).
        var deviceSnapshots: [String: [String: Double]] = [:]
        /// Each node process's proxy listener, to bring the proxies back on the same ports after a proxy restart.
        var proxyListeners: [String: String] = [:]
        var proxyStarts = 0
    }

    public init(configuration: LauncherConfiguration) throws {
        self.configuration = configuration
        run = try RunDirectory.create(root: configuration.runsRoot, now: configuration.wall.now())
        // Attackers and backends are not devices of the fleet: the progress line and the summary count the signing devices.
        let hostile = configuration.scenario.nonDeviceGroupNames
        let devices = Dictionary(
            configuration.plan.nodes.map { ($0.process, hostile.contains($0.group) ? 0 : $0.devices.count) }, uniquingKeysWith: +)
        let state = LauncherState(devicesPerProcess: devices)
        self.state = state
        supervisor = Supervisor(executable: configuration.executable, run: run) { state.handle($0) }
        history = try HistoryWriter(path: run.historyFile(process: "launcher"))
        adminToken = Self.randomSecret()
        mutable = Mutex(Mutable(progress: ProgressLine(interval: configuration.progressInterval)))
    }

    /// 128 random bits in hex: the admin token, the rival user's secret.
    static func randomSecret() -> String {
        (0..<4).map { _ in String(format: "%08x", UInt32.random(in: .min ... .max)) }.joined()
    }

    /// Ends the run early (SIGINT/SIGTERM): no drain, everything stopped, verdict unknown.
    public func interrupt() {
        interruptedFlag.withLock { $0 = true }
        state.changes.ring()
    }
    var interrupted: Bool { interruptedFlag.withLock { $0 } }

    func message(_ text: String) { mutable.withLock { $0.progress.message(text) } }

    /// Runs the whole scenario; never leaves a child behind.
    public func execute() async -> LaunchResult {
        let started = configuration.wall.secondsSince1970
        var notes: [String] = []
        var runSeconds = 0.0
        var drainSeconds = 0.0
        // Set once the drain has run: the nodes that did not drain.
        var undrained: [String]?
        do {
            try Data(configuration.scenarioText.utf8).write(to: URL(fileURLWithPath: run.scenarioFile))
            try writeSchedule()
            try await preparePostgres()
            try await startCoordinators()
            try await prepareTemplates()
            if configuration.scenario.proxy { try await startProxy() }
            try await prepareHosts()
            try await startNodes()
            runSeconds = await runSchedule()
            if !interrupted {
                let drainStart = configuration.wall.secondsSince1970
                await heal()
                undrained = await drain()
                drainSeconds = configuration.wall.secondsSince1970 - drainStart
            }
        } catch {
            notes.append("the run stopped early: \(error)")
            message("error: \(error)")
        }
        mutable.withLock { $0.progress.finish() }
        await stopEverything()
        notes += await gatherHosts()
        if interrupted { notes.append("interrupted (SIGINT/SIGTERM): not drained, not checked") }
        let result = await finish(
            started: started, runSeconds: runSeconds, drainSeconds: drainSeconds, undrained: undrained, notes: notes)
        // After the checker, which reads a PostgreSQL store while the server runs.
        await stopPostgres()
        return result
    }

    /// The store the coordinators open (``Mutable/storeLocation``; `coordinator.sqlite` by default).
    var storeLocation: String { mutable.withLock { $0.storeLocation } ?? run.coordinatorStore }

    /// `schedule.json`: the fault events as planned from the seed (the launcher's
    /// history shows them as applied), and what the schedule could not do.
    public var scheduleFile: String { URL(fileURLWithPath: run.path).appendingPathComponent("schedule.json").path }

    func writeSchedule() throws {
        struct Planned: Encodable {
            var seed: UInt64
            var events: [FaultEvent]
            var notes: [String]
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let planned = Planned(seed: configuration.seed, events: configuration.plan.faults, notes: configuration.plan.notes)
        try encoder.encode(planned).write(to: URL(fileURLWithPath: scheduleFile))
    }

    // MARK: - Starting

    /// The endpoint (it changes once known) and the admin token (kept off the disk) are
    /// flags; the rest is `coordinator.json` in the run directory.
    func coordinatorArguments(bind: String) -> [String] {
        ["coordinator", "--config", run.coordinatorConfigFile, "--bind", bind, "--admin-token", adminToken]
    }

    /// `coordinator.json`: `signfleet coordinator`'s configuration file (docs/coordinator.md)
    /// with the scenario's coordinator settings, its rate limits as the demo account's.
    static func coordinatorConfiguration(_ settings: CoordinatorSettings, store: String, publicKeyFile: String? = nil) -> [String: Any] {
        var values: [String: Any] = [
            "store": store, "seed-demo": true, "http": "127.0.0.1:0", "heartbeat-ms": max(10, Int(settings.heartbeat * 1000)),
        ]
        if let publicKeyFile { values["public-key-file"] = publicKeyFile }
        if let hourly = settings.rateLimitHourly { values["demo-hourly-limit"] = hourly }
        if let burst = settings.rateLimitBurst { values["demo-burst-limit"] = burst }
        return values
    }

    func writeCoordinatorConfiguration() throws {
        let values = Self.coordinatorConfiguration(
            configuration.scenario.coordinator, store: storeLocation, publicKeyFile: run.coordinatorPublicKeyFile)
        let data = try JSONSerialization.data(withJSONObject: values, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        try data.write(to: URL(fileURLWithPath: run.coordinatorConfigFile))
    }

    /// Starts the scenario's coordinators one after the other (the first creates and migrates the
    /// store and seeds the demo account; the others find them), each on its own endpoint, all on
    /// the one store and so with one CURVE key.
    func startCoordinators() async throws {
        try writeCoordinatorConfiguration()
        var endpoints: [String] = []
        for name in configuration.scenario.coordinator.processNames {
            let spec = ChildSpec(
                name: name, arguments: coordinatorArguments(bind: coordinatorBind),
                restartBudget: configuration.scenario.coordinator.restartBudget)
            await supervisor.start(spec)
            let endpoint = try await waitForAnnounced("listening", by: name)
            let http = try await waitForAnnounced("http", by: name)
            // A restart (crash or scheduled kill) comes back on the same endpoint, HTTP address and
            // store: devices keep their endpoint, backend groups and SDKs their base URL.
            var again = spec
            again.arguments = coordinatorArguments(bind: endpoint) + ["--http", http]
            await supervisor.update(again)
            endpoints.append(Self.localEndpoint(endpoint))
            message("\(name) listening on \(endpoint)")
            // Where a DocuSign SDK points (docs/rest-api.md); a restart keeps it.
            message("\(name) REST API on http://\(http)/restapi")
        }
        // Printed before `listening`; the devices pin it (and a restart serves the same key, from the store).
        let publicKey = state.announced("curve-public-key", by: FaultSchedule.coordinatorProcess)
        mutable.withLock {
            $0.coordinatorEndpoint = endpoints.first
            $0.coordinatorEndpoints = endpoints
            $0.coordinatorPublicKey = publicKey
        }
    }

    /// Templates the scenario edits must exist: the demo ones are seeded with the demo
    /// account; any other is created (an existing one is left as it is: its
    /// `create-sample` fails with already_exists in logs/template-<id>.log).
    func prepareTemplates() async throws {
        var names: [String] = []
        for spec in configuration.scenario.faults {
            if case .templateEdit(let template) = spec.fault, !names.contains(template) { names.append(template) }
        }
        for name in names {
            // The store goes by environment: a postgres:// URL may hold a password, and a
            // command line is readable by every user of the machine.
            _ = await runOnce(
                name: "template-\(name)", arguments: ["admin", "templates", "create-sample", "--name", name, "--id", name],
                environment: ["SIGNFLEET_STORE": storeLocation])
        }
    }

    func startProxy() async throws {
        await supervisor.start(
            ChildSpec(name: "proxy", arguments: ["proxy", "--api", "127.0.0.1:0", "--seed", "\(configuration.seed)"], restartBudget: 3))
        let api = try await waitForAnnounced("api", by: "proxy")
        let client = FaultProxyClient(address: api)
        let starts = state.starts(of: "proxy")
        mutable.withLock {
            $0.proxyClient = client
            $0.proxyStarts = starts
        }
        message("fault proxy api on \(api)")
    }

    /// The upstream `host:port` of the proxies: the coordinator's endpoint without `tcp://`.
    var coordinatorAddress: String {
        let endpoint = mutable.withLock { $0.coordinatorEndpoint } ?? ""
        return endpoint.hasPrefix("tcp://") ? String(endpoint.dropFirst(6)) : endpoint
    }

    func startNodes() async throws {
        let scenario = configuration.scenario
        let groups = Dictionary(scenario.groups.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let hostile = hostileGroups
        let rivalSecret = hostile.isEmpty ? nil : try await createRivalAccount()
        let backends = Dictionary(scenario.groups.compactMap { group in group.backend.map { (group.name, $0) } }, uniquingKeysWith: { a, _ in a })
        let httpBase = state.announced("http", by: FaultSchedule.coordinatorProcess).map { "http://\($0)" }
        let client = mutable.withLock { $0.proxyClient }
        var endpoints: [String: String] = [:]
        for node in configuration.plan.nodes {
            // Attackers and backends connect straight to the coordinator: the proxies' faults are the devices'.
            if let client, hostile[node.group] == nil, backends[node.group] == nil {
                do {
                    let proxy = try await client.create(ProxyDefinition(name: node.process, upstream: coordinatorAddress))
                    endpoints[node.process] = "tcp://\(proxy.listen)"
                    mutable.withLock { $0.proxyListeners[node.process] = proxy.listen }
                } catch {
                    throw LauncherError.proxySetup("creating the proxy for \(node.process): \(error)")
                }
            } else {
                endpoints[node.process] = mutable.withLock { $0.coordinatorEndpoint } ?? ""
            }
        }
        // Several coordinators (no proxies then, ScenarioLoader): every honest node gets them all and
        // fails over between them; attackers stay on the first.
        let allEndpoints = mutable.withLock { $0.coordinatorEndpoints }
        var failover: [String: [String]] = [:]
        if allEndpoints.count > 1 {
            for node in configuration.plan.nodes where hostile[node.group] == nil && backends[node.group] == nil {
                endpoints[node.process] = allEndpoints[0]
                failover[node.process] = Array(allEndpoints.dropFirst())
            }
        }
        // Node hosts reach the coordinators at their own address for them (same ports).
        for node in configuration.plan.nodes {
            guard let host = self.host(of: node) else { continue }
            endpoints[node.process] = endpoints[node.process].map { Self.endpoint($0, reachedFrom: host) }
            failover[node.process] = failover[node.process]?.map { Self.endpoint($0, reachedFrom: host) }
        }
        let runStart = configuration.wall.secondsSince1970
        mutable.withLock { $0.runStart = runStart }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        // Attackers start first, so a squatter can try to enroll honest ids before their devices do.
        let ordered = configuration.plan.nodes.filter { hostile[$0.group] != nil } + configuration.plan.nodes.filter { hostile[$0.group] == nil }
        for node in ordered {
            guard let group = groups[node.group] else { continue }
            var plan = NodePlan(
                process: node.process, group: node.group, endpoint: endpoints[node.process] ?? "",
                dataDirectory: run.devicesDirectory, historyFile: run.historyFile(process: node.process), runStart: runStart,
                duration: scenario.duration, devices: node.devices, behaviour: group.behaviour, connectivity: group.connectivity,
                pens: group.pens, outages: node.outages, statsInterval: configuration.tick,
                requestTimeout: 1, serverKey: mutable.withLock { $0.coordinatorPublicKey })
            plan.failoverEndpoints = failover[node.process]
            plan.niceness = configuration.nodeNiceness
            plan.drainRamp = scenario.drainRamp > 0 ? scenario.drainRamp : nil
            plan.startRamp = scenario.startRamp > 0 ? scenario.startRamp : nil
            placeOnHost(&plan, node: node)
            if let settings = hostile[node.group], let rivalSecret {
                plan.hostile = hostilePlan(for: node, settings: settings, rivalSecret: rivalSecret)
            }
            if let settings = backends[node.group] {
                guard let httpBase else {
                    throw LauncherError.childDidNotStart(process: "coordinator", waitingFor: "http", logFile: run.logFile(process: "coordinator"))
                }
                plan.backend = BackendPlan(baseURL: httpBase, logFile: run.backendLogFile(process: node.process), settings: settings)
            }
            let path = run.nodePlanFile(process: node.process)
            try encoder.encode(plan).write(to: URL(fileURLWithPath: path))
            await supervisor.start(try await nodeChildSpec(node, planFile: path))
        }
        let honest = configuration.plan.nodes.filter { hostile[$0.group] == nil && backends[$0.group] == nil }
        let attackers = configuration.plan.nodes.filter { hostile[$0.group] != nil }
        let backendNodes = configuration.plan.nodes.filter { backends[$0.group] != nil }
        // "started" means spawned: every node process has its pid (and is in the pids file).
        for node in ordered {
            _ = await supervisor.waitUntilRunning(node.process, within: .seconds(configuration.startTimeout))
        }
        record(.ok, .start, details: ["nodes": "\(configuration.plan.nodes.count)", "seed": "\(configuration.seed)"])
        var started = "started \(honest.count) node processes with \(honest.reduce(0) { $0 + $1.devices.count }) devices"
        if !attackers.isEmpty {
            started += " and \(attackers.count) hostile process\(attackers.count == 1 ? "" : "es") with \(attackers.reduce(0) { $0 + $1.devices.count }) attackers"
        }
        if !backendNodes.isEmpty {
            started += " and \(backendNodes.count) backend process\(backendNodes.count == 1 ? "" : "es") with \(backendNodes.reduce(0) { $0 + $1.devices.count }) REST backends"
        }
        message(started)
    }

    // MARK: - Running the schedule

    /// Applies the fault events at their times and samples the fleet until the
    /// duration ends (or an interrupt); returns the seconds run.
    func runSchedule() async -> Double {
        let runStart = mutable.withLock { $0.runStart }
        let duration = configuration.scenario.duration
        var nextFault = 0
        var nextSample = 0.0
        var snapshots = plannedSnapshots[...]
        while !interrupted {
            let seen = state.changes.generation
            let now = configuration.wall.secondsSince1970 - runStart
            if now >= duration { break }
            while let next = snapshots.first, next.time <= now {
                takeSnapshot(for: next.event)
                snapshots = snapshots.dropFirst()
            }
            let events = configuration.plan.faults
            while nextFault < events.count, events[nextFault].time <= now {
                if events[nextFault].time < duration { await apply(events[nextFault]) }
                nextFault += 1
            }
            await reviveProxiesIfRestarted()
            if now >= nextSample {
                takeSample(at: now, phase: "run")
                nextSample += configuration.tick
            }
            // Until the next thing due, or an event (an interrupt, a restarted proxy to revive).
            let due = [duration, nextSample, snapshots.first?.time, nextFault < events.count ? events[nextFault].time : nil]
            await waitForChange(after: seen, untilRunTime: due.compactMap { $0 }.min() ?? duration)
        }
        return min(duration, configuration.wall.secondsSince1970 - runStart)
    }

    /// Sleeps until `time` (seconds since the run started) or until a child's event or an
    /// interrupt rings ``LauncherState/changes`` after `seen`.
    func waitForChange(after seen: UInt64, untilRunTime time: Double) async {
        let runStart = mutable.withLock { $0.runStart }
        await waitForChange(after: seen, seconds: runStart + time - configuration.wall.secondsSince1970)
    }

    /// Sleeps for at most `seconds` or until ``LauncherState/changes`` rings after `seen`.
    func waitForChange(after seen: UInt64, seconds: Double) async {
        // Bounded, so a far or absurd time (NaN included: it waits for nothing) cannot trap.
        let bounded = seconds.isNaN ? 0 : min(max(seconds, 0), 86_400)
        let milliseconds = Int64(exactly: (bounded * 1000).rounded(.up)) ?? 0
        _ = await state.changes.wait(after: seen, atMost: .milliseconds(milliseconds), clock: configuration.clock)
    }

    /// A proxy process that crashed and was restarted by the supervisor has lost its
    /// proxies: create them again on the same ports (the nodes keep their endpoints), then
    /// apply again the toxics and partitions that were active at the crash, so the scenario's
    /// faults last as scheduled (their stops still come on time).
    func reviveProxiesIfRestarted() async {
        guard configuration.scenario.proxy else { return }
        let (known, listeners) = mutable.withLock { ($0.proxyStarts, $0.proxyListeners) }
        let starts = state.starts(of: "proxy")
        guard starts > known, let api = state.announced("api", by: "proxy") else { return }
        let client = FaultProxyClient(address: api)
        mutable.withLock {
            $0.proxyStarts = starts
            $0.proxyClient = client
        }
        for (name, listen) in listeners.sorted(by: { $0.key < $1.key }) {
            do {
                try await client.create(ProxyDefinition(name: name, listen: listen, upstream: coordinatorAddress))
            } catch {
                message("warning: recreating the proxy of \(name) on \(listen): \(error)")
            }
        }
        // `ok`, not `info`: the outcome is known (the checker resolves `info` events against the stores).
        record(.ok, .restart, details: ["process": "proxy", "proxies": "\(listeners.count)"])
        message("the fault proxy restarted; its \(listeners.count) proxies are back on their ports")
        await reapplyActiveProxyFaults()
    }

    /// Applies again (as the start events they were) the toxics and partitions still active.
    func reapplyActiveProxyFaults() async {
        let active = Set(mutable.withLock { $0.active.keys })
        let starts = configuration.plan.faults.filter { event in
            guard event.phase == .start, active.contains(event.id) else { return false }
            switch event.fault {
            case .toxic, .partition: return true
            default: return false
            }
        }
        for event in starts {
            let op = Self.operation(for: event.fault, isStart: true, healing: false)
            let details = [
                "fault": event.fault.label, "id": event.id, "targets": event.targets.joined(separator: ","), "phase": "reapplied",
            ]
            record(.invoke, op, details: details)
            let failures = await perform(event)
            if failures.isEmpty {
                record(.ok, op, details: details)
                message("\(event.label): applied again after the proxy restart")
            } else {
                record(.fail, op, error: failures.joined(separator: "; "), details: details)
                message("warning: \(event.label) could not be applied again after the proxy restart: \(failures.joined(separator: "; "))")
            }
        }
    }

    func takeSample(at time: Double, phase: String) {
        let active = mutable.withLock { state in state.active.keys.sorted().compactMap { state.active[$0]?.label } }
        let sample = state.sample(time: time, activeFaults: active)
        if let line = try? JSONEncoder().encode(sample) {
            appendLine(line, to: run.timelineFile)
        }
        let duration = configuration.scenario.duration
        mutable.withLock { $0.progress.show(sample, phase: phase, duration: duration) }
    }

    func appendLine(_ data: Data, to path: String) {
        if !FileManager.default.fileExists(atPath: path) { FileManager.default.createFile(atPath: path, contents: nil) }
        guard let handle = FileHandle(forWritingAtPath: path) else { return }
        handle.seekToEndOfFile()
        handle.write(data + Data("\n".utf8))
        try? handle.close()
    }

    func record(_ type: HistoryEvent.Kind, _ op: HistoryEvent.Operation, error: String? = nil, details: [String: String]? = nil) {
        do {
            try history.append(HistoryEvent(process: "launcher", type: type, op: op, error: error, details: details))
        } catch {
            message("warning: cannot write the launcher's history: \(error)")
        }
    }

    // MARK: - Waiting

    /// Waits until `process` prints `<key> <value>` (since its latest start) and returns the value.
    func waitForAnnounced(_ key: String, by process: String, timeout: Double? = nil) async throws -> String {
        let deadline = configuration.wall.secondsSince1970 + (timeout ?? configuration.startTimeout)
        while configuration.wall.secondsSince1970 < deadline, !interrupted {
            let seen = state.changes.generation
            if let value = state.announced(key, by: process) { return value }
            if state.gaveUp.contains(process) { break }
            await waitForChange(after: seen, seconds: deadline - configuration.wall.secondsSince1970)
        }
        throw LauncherError.childDidNotStart(process: process, waitingFor: key, logFile: run.logFile(process: process))
    }

    /// A `POST` to the coordinator's admin API (bearer: the run's admin token) with a JSON body;
    /// throws unless it answers 2xx (or 409 when `acceptingConflict`: it exists already).
    func adminPost(address: String, path: String, body: some Encodable, acceptingConflict: Bool) async throws {
        guard let url = URL(string: "http://\(address)/\(path)") else { throw LauncherError.adminRequest("bad admin address \(address)") }
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        request.setValue("Bearer \(adminToken)", forHTTPHeaderField: "Authorization")
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = try JSONEncoder().encode(body)
        request.timeoutInterval = 10
        let (data, response) = try await URLSession.shared.data(for: request)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        if (200..<300).contains(status) || (acceptingConflict && status == 409) { return }
        throw LauncherError.adminRequest("POST /\(path) answered \(status): \(String(decoding: data.prefix(500), as: UTF8.self))")
    }

    /// Runs a one-shot `signfleet` command (not supervised) and waits for it.
    func runOnce(name: String, arguments: [String], environment: [String: String] = [:]) async -> ChildExit {
        let oneShot = Supervisor(executable: configuration.executable, run: run) { _ in }
        var spec = ChildSpec(name: name, arguments: arguments, restartBudget: 0)
        spec.environment = environment
        await oneShot.start(spec)
        _ = await oneShot.waitUntilDown(name, within: .seconds(configuration.startTimeout))
        await oneShot.stop(name, grace: .seconds(1))
        return await oneShot.lastExit(of: name) ?? .failedToStart("no exit seen")
    }
}
