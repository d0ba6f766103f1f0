import Chaos
import Coordinator
import FleetProtocol
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Applying the fault schedule: each start and stop recorded as invoke then ok (or
/// fail) in the launcher's history, with the fault, its schedule id and its targets.
extension Launcher {
    func apply(_ event: FaultEvent, healing: Bool = false) async {
        let op = Self.operation(for: event.fault, isStart: event.phase != .stop, healing: healing)
        var details = ["fault": event.fault.label, "id": event.id, "targets": event.targets.joined(separator: ",")]
        details["phase"] = event.phase.rawValue
        record(.invoke, op, details: details)
        let failures = await perform(event)
        let time = configuration.wall.secondsSince1970 - mutable.withLock { $0.runStart }
        mutable.withLock { state in
            switch event.phase {
            case .start:
                state.active[event.id] = AppliedFault(kind: event.fault.label, targets: event.targets, start: time)
            case .stop:
                if var fault = state.active.removeValue(forKey: event.id) {
                    fault.end = time
                    state.applied.append(fault)
                }
            case .instant:
                state.applied.append(AppliedFault(kind: event.fault.label, targets: event.targets, start: time, end: time))
            }
        }
        if failures.isEmpty {
            record(.ok, op, details: details)
        } else {
            record(.fail, op, error: failures.joined(separator: "; "), details: details)
            message("warning: \(event.label) (\(event.phase.rawValue)): \(failures.joined(separator: "; "))")
        }
    }

    static func operation(for fault: Fault, isStart: Bool, healing: Bool) -> HistoryEvent.Operation {
        if healing { return .heal }
        switch fault {
        case .killNode, .killCoordinator: return isStart ? .kill : .restart
        case .pauseNode, .pauseCoordinator: return isStart ? .pause : .resume
        case .offline: return isStart ? .offline : .online
        case .toxic: return isStart ? .toxic : .heal
        case .partition, .partitionHost: return isStart ? .partition : .heal
        case .templateEdit: return .templateEdit
        case .restoreCoordinator, .restoreNode: return isStart ? .restore : .restart
        case .restartPostgres: return isStart ? .kill : .restart
        }
    }

    /// Does what the event says; returns what failed.
    func perform(_ event: FaultEvent) async -> [String] {
        var failures: [String] = []
        let isStart = event.phase != .stop
        let client = mutable.withLock { $0.proxyClient }
        switch event.fault {
        case .killNode, .killCoordinator, .restoreCoordinator, .restoreNode:
            for target in event.targets {
                if isStart {
                    await supervisor.kill(target)
                    state.setUnavailable(target, true)
                    if case .restoreCoordinator = event.fault { failures += restoreStore(from: event.id) }
                    if case .restoreNode = event.fault { failures += restoreDeviceStores(of: target, from: event.id) }
                } else {
                    // Wait for the new process, so a fault right after this one finds it.
                    await supervisor.restart(target)
                    if await !supervisor.waitUntilRunning(target, within: .seconds(10)) {
                        failures.append("\(target) did not start again")
                    }
                }
            }
        case .pauseNode, .pauseCoordinator:
            for target in event.targets {
                let sent = await supervisor.signal(target, isStart ? SIGSTOP : SIGCONT)
                if state.nodeNames.contains(target) { state.setUnavailable(target, isStart) }
                if !sent { failures.append("\(target) is not running") }
            }
        case .restartPostgres(let crash):
            failures += await restartPostgres(crash: crash, isStart: isStart)
        case .partitionHost(let host):
            failures += await partitionHost(host, isStart: isStart)
        case .offline:
            break  // the nodes apply their outages themselves (NodePlan.outages); recorded for the report
        case .toxic(let spec):
            guard let client else { return ["the scenario has no proxy (proxy: true) for a toxic"] }
            for target in event.targets {
                do {
                    if isStart {
                        let kind = try ToxicKind(type: spec.type, attributes: spec.attributes.mapValues { Int($0.rounded()) })
                        let toxic = Toxic(
                            name: event.id, stream: ToxicStream(rawValue: spec.stream) ?? .downstream,
                            toxicity: spec.toxicity, kind: kind)
                        try await client.addToxic(toxic, to: target)
                    } else {
                        try await client.removeToxic(event.id, from: target)
                    }
                } catch {
                    failures.append("\(target): \(error)")
                }
            }
        case .partition:
            guard let client else { return ["the scenario has no proxy (proxy: true) for a partition"] }
            for target in event.targets {
                do {
                    try await client.setEnabled(target, !isStart)
                } catch {
                    failures.append("\(target): \(error)")
                }
            }
        case .templateEdit(let template):
            let edits = mutable.withLock { state -> Int in
                state.templateEdits += 1
                return state.templateEdits
            }
            // Through the running coordinator's admin API, never by writing its store file.
            do {
                guard let address = await runningCoordinatorHTTP() else { throw LauncherError.adminRequest("no coordinator is running") }
                try await adminPost(
                    address: address, path: "admin/accounts/demo/templates/\(template)/tab",
                    body: CoordinatorAdminRoutes.TabEdit(index: 0, label: "edited by the fleet launcher (\(edits))"), acceptingConflict: false)
            } catch {
                failures.append("template edit: \(error)")
            }
        }
        return failures
    }

    /// The HTTP address of a running coordinator, the first one that is up (any of them serves
    /// the one store's admin API).
    func runningCoordinatorHTTP() async -> String? {
        for name in configuration.scenario.coordinator.processNames {
            let running = await supervisor.isRunning(name)
            let paused = await supervisor.isPaused(name)
            if running, !paused, let address = state.announced("http", by: name) { return address }
        }
        return nil
    }

    // MARK: - Heal, drain, stop

    /// Ends every active fault (as the schedule's stop would), removes all toxics,
    /// enables every proxy, resumes paused processes and restarts what is down.
    func heal() async {
        let active = mutable.withLock { $0.active }
        for id in active.keys.sorted() {
            guard let start = configuration.plan.faults.first(where: { $0.id == id && $0.phase == .start }) else { continue }
            var stop = start
            stop.phase = .stop
            stop.time = configuration.wall.secondsSince1970 - mutable.withLock { $0.runStart }
            await apply(stop, healing: true)
        }
        if let client = mutable.withLock({ $0.proxyClient }) {
            do {
                try await client.reset()
            } catch {
                message("warning: proxy reset: \(error)")
            }
        }
        for name in await supervisor.names {
            _ = await supervisor.signal(name, SIGCONT)
        }
        let exhausted = Set(await supervisor.exhausted)
        for name in configuration.scenario.coordinator.processNames + configuration.plan.nodes.map(\.process) where !exhausted.contains(name) {
            if await !supervisor.isRunning(name), !state.drained.contains(name) {
                await supervisor.restart(name)
            }
        }
        record(.ok, .heal, details: ["phase": "final"])
    }

    /// SIGUSR1 to every node (again to one that restarted meanwhile, once it is up),
    /// then waits until every node printed `drained` or the drain timeout passed.
    /// - Returns: the nodes that did not drain (none: every node did).
    func drain() async -> [String] {
        let nodes = configuration.plan.nodes.map(\.process)
        let deadline = configuration.wall.secondsSince1970 + configuration.scenario.drainTimeout
        var signalled: [String: Int] = [:]
        record(.invoke, .drain, details: ["nodes": "\(nodes.count)"])
        let runStart = mutable.withLock { $0.runStart }
        var nextSample = configuration.wall.secondsSince1970 - runStart
        while configuration.wall.secondsSince1970 < deadline, !interrupted {
            let seen = state.changes.generation
            let drained = state.drained
            let exhausted = Set(await supervisor.exhausted)
            var waiting = 0
            for node in nodes where !drained.contains(node) && !exhausted.contains(node) {
                waiting += 1
                let starts = state.starts(of: node)
                // A node can only handle SIGUSR1 once it is up: its first stats line says so.
                if signalled[node] != starts, state.hasReported(node), await supervisor.isRunning(node) {
                    await supervisor.signal(node, SIGUSR1)
                    signalled[node] = starts
                }
            }
            if waiting == 0 { break }
            await reviveProxiesIfRestarted()
            let now = configuration.wall.secondsSince1970 - runStart
            if now >= nextSample {
                takeSample(at: now, phase: "drain")
                nextSample += configuration.tick
            }
            // Until the next sample or the deadline, or a node's event (started, reported, drained, exited).
            await waitForChange(after: seen, untilRunTime: min(nextSample, deadline - runStart))
        }
        takeSample(at: configuration.wall.secondsSince1970 - runStart, phase: "drain")
        let drained = state.drained.intersection(nodes).count
        let undrained = nodes.filter { !state.drained.contains($0) }.sorted()
        var details = ["drained": "\(drained)", "nodes": "\(nodes.count)"]
        if !undrained.isEmpty { details["undrained"] = undrained.joined(separator: ",") }
        record(drained == nodes.count ? .ok : .info, .drain, details: details)
        return undrained
    }

    /// Stops the nodes left, the coordinator and the proxy: SIGTERM, SIGKILL after the grace.
    func stopEverything() async {
        let grace = Duration.milliseconds(Int(configuration.stopGrace * 1000))
        await withTaskGroup(of: Void.self) { group in
            for node in configuration.plan.nodes.map(\.process) {
                group.addTask { await self.supervisor.stop(node, grace: grace) }
            }
        }
        await supervisor.stop("proxy", grace: grace)
        for name in configuration.scenario.coordinator.processNames {
            await supervisor.stop(name, grace: grace)
        }
        await supervisor.stopAll(grace: grace)
        record(.ok, .stop, details: ["phase": "final"])
    }
}
