import FleetProtocol
import Foundation
import DeviceNode
import Logging
import Synchronization
import ZeroMQ

#if canImport(Glibc)
import Glibc
#endif

/// Runs a ``NodePlan`` in this process: every device of the plan as a ``SimulatedDevice`` on one
/// shared `ZMQIOLoop`, one ``HistoryWriter`` for all, and the `stats` line every
/// `statsInterval` (see ``NodePlan`` for the contract with the launcher).
///
/// ``run(output:)`` returns after a drain (``requestDrain()``) has emptied every outbox — having
/// printed `drained` — and throws `CancellationError` when its task is cancelled (SIGTERM).
public final class NodeHost: Sendable {
    public let plan: NodePlan
    private let logger: Logger
    /// What the stats interval is timed on.
    private let clock: any FleetClock
    private let drainRequested = Mutex<(requested: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    public init(plan: NodePlan, logger: Logger, clock: any FleetClock = ContinuousClock()) {
        self.plan = plan
        self.logger = logger
        self.clock = clock
    }

    /// Asks the running host to drain (SIGUSR1). Safe from any thread, before or during ``run(output:)``.
    public func requestDrain() {
        let waiter = drainRequested.withLock { state -> CheckedContinuation<Void, Never>? in
            state.requested = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    private func waitForDrainRequest() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let now = drainRequested.withLock { state -> Bool in
                    if state.requested { return true }
                    state.waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter = drainRequested.withLock { state -> CheckedContinuation<Void, Never>? in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
    }

    /// Runs the plan; `output` receives the `stats …` and `drained` lines.
    public func run(output: @escaping @Sendable (String) -> Void) async throws {
        // Before any store opens: a node holds hundreds of stores, each cache grows as it is used.
        SQLiteProcessSettings.growPageCachesOnDemand()
        // Each device holds a socket, its connection and its SQLite files.
        let limit = OpenFileLimit.raiseToHardLimit()
        logger.info("open file limit", metadata: ["limit": "\(limit)"])
        try FileManager.default.createDirectory(atPath: plan.dataDirectory, withIntermediateDirectories: true)
        // Attackers keep no history: the checker's evidence is the honest devices'.
        let history = plan.hostile == nil && plan.backend == nil ? try HistoryWriter(path: plan.historyFile) : nil
        defer { history?.close() }
        let context = try ZMQContext(maxSockets: max(1024, plan.devices.count * 2 + 64))
        let loop = try ZMQIOLoop(context: context, label: "node-io")
        let counters = NodeCounters()
        let plan = self.plan
        let workers: [Worker]
        // Attackers keep a log of their attempts instead.
        let hostileLog = try plan.hostile.map { try HistoryWriter(path: $0.logFile) }
        defer { hostileLog?.close() }
        // Backends keep a log of their REST ceremonies (``BackendEvent``).
        let backendLog = try plan.backend.map { try HistoryWriter(path: $0.logFile) }
        defer { backendLog?.close() }
        if let backend = plan.backend, let log = backendLog {
            workers = plan.devices.map { device in
                let worker = BackendWorker(
                    id: device.id, plan: plan, backend: backend, seed: device.seed, loop: loop, log: log, logger: logger, clock: clock)
                return Worker(
                    id: device.id, run: { try await worker.run() }, drain: { await worker.drain() }, describe: { worker.describe() })
            }
        } else if let hostile = plan.hostile, let log = hostileLog {
            // Attackers: they sign nothing (their stats stay zero) and stop at the drain.
            workers = plan.devices.map { device in
                let attacker = HostileDevice(
                    id: device.id, behaviour: hostile.behaviours[device.id] ?? .impersonate, plan: plan, hostile: hostile,
                    seed: device.seed, loop: loop, log: log, logger: logger)
                return Worker(id: device.id, run: { try await attacker.run() }, drain: nil)
            }
        } else {
            guard let history else { return }
            // One coordinator, one process: what one device's replies show about it (or about this
            // process's own CPU) holds for the others that come online after it.
            let roundTrips = RoundTripMemory()
            workers = plan.devices.map { device in
                var configuration = SimulatedDeviceConfiguration(plan: plan, device: device)
                configuration.roundTrips = roundTrips
                let simulated = SimulatedDevice(
                    configuration: configuration, loop: loop, logger: logger,
                    history: history, process: plan.process, counters: counters)
                return Worker(
                    id: device.id, run: { try await simulated.run() }, drain: { await simulated.drain() },
                    describe: { await simulated.describe() })
            }
        }
        func stats() -> String {
            let snapshot = counters.snapshot(time: WallClock.system.secondsSince1970, devices: plan.hostile == nil && plan.backend == nil ? plan.devices.count : 0)
            let json = (try? JSONEncoder().encode(snapshot)).flatMap { String(data: $0, encoding: .utf8) } ?? "{}"
            return NodeStats.linePrefix + json
        }
        do {
            try await withThrowingTaskGroup(of: Bool.self) { group in
                for worker in workers {
                    group.addTask {
                        do {
                            try await worker.run()
                        } catch let error where !(error is CancellationError) {
                            self.logger.error("device stopped", metadata: ["device": "\(worker.id)", "error": "\(error)"])
                            throw error
                        }
                        return false
                    }
                }
                group.addTask { [clock] in
                    let interval = Duration.milliseconds(Int64((plan.statsInterval * 1000).rounded()))
                    while !Task.isCancelled {
                        try await clock.sleep(for: interval)
                        output(stats())
                    }
                    return false
                }
                group.addTask {
                    await self.waitForDrainRequest()
                    try Task.checkCancellation()
                    self.logger.info("draining", metadata: ["devices": "\(workers.count)"])
                    await self.drain(workers)
                    try Task.checkCancellation()
                    return true
                }
                // A device ending is an error (they run until stopped); the drain ending is success.
                while let finished = try await group.next() {
                    if finished {
                        // Counted while every device is still online and open.
                        output(stats())
                        output("drained")
                        break
                    }
                }
                group.cancelAll()
            }
        } catch {
            await loop.shutdown()
            context.shutdown()
            throw error
        }
        await loop.shutdown()
        context.shutdown()
    }

    /// Drains every worker that has something to drain and returns when all have. A drain that
    /// takes long is not judged here (the launcher's drain timeout does that), but every
    /// ``stragglerReportInterval`` the log names the workers still draining and what each is doing,
    /// so a run that ends `not every node drained` shows why.
    private func drain(_ workers: [Worker]) async {
        let draining = workers.filter { $0.drain != nil }
        guard !draining.isEmpty else { return }
        let left = DrainingWorkers(draining.map(\.id))
        await withTaskGroup(of: Void.self) { drains in
            for worker in draining {
                guard let drain = worker.drain else { continue }
                drains.addTask {
                    await drain()
                    left.remove(worker.id)
                }
            }
            drains.addTask { [clock, logger] in
                var waited = Duration.zero
                while true {
                    do { try await clock.sleep(for: Self.stragglerReportInterval) } catch { return }
                    waited += Self.stragglerReportInterval
                    let ids = left.ids
                    let named = draining.filter { ids.contains($0.id) }.prefix(Self.stragglersNamed)
                    var lines: [String] = []
                    for worker in named { lines.append("\(worker.id): \(await worker.describe?() ?? "?")") }
                    logger.warning(
                        "still draining",
                        metadata: ["waited": "\(waited)", "workers": "\(ids.count)", "first": "\(lines.joined(separator: " | "))"])
                }
            }
            // The reporter runs until every drain has ended.
            while await drains.next() != nil {
                if left.ids.isEmpty { drains.cancelAll() }
            }
        }
    }

    /// The workers whose drain has not ended yet, shared by the drains and the reporter.
    private final class DrainingWorkers: Sendable {
        private let left: Mutex<Set<String>>
        init(_ ids: [String]) { left = Mutex(Set(ids)) }
        var ids: Set<String> { left.withLock { $0 } }
        func remove(_ id: String) { _ = left.withLock { $0.remove(id) } }
    }

    static let stragglerReportInterval = Duration.seconds(10)
    /// At most this many stragglers are described per report (a node can hold thousands).
    static let stragglersNamed = 5

    /// One device's work in this process: a simulated device, or an attacker (which has nothing to
    /// drain: it stops when the host does).
    private struct Worker: Sendable {
        var id: String
        var run: @Sendable () async throws -> Void
        var drain: (@Sendable () async -> Void)?
        /// What the worker is doing now, for the log of a drain that takes long.
        var describe: (@Sendable () async -> String)?
    }
}
