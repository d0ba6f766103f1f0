import FleetProtocol
import Foundation

/// After everything stopped: merge the histories, run the checker, apply the
/// scenario's checks, write the summary and the report, and decide the exit code.
extension Launcher {
    /// `undrained`: nil when no drain ran (the run stopped early or was interrupted).
    func finish(started: Double, runSeconds: Double, drainSeconds: Double, undrained: [String]?, notes initialNotes: [String]) async
        -> LaunchResult
    {
        var notes = initialNotes
        let drainedAll = undrained?.isEmpty == true
        var events: [HistoryEvent] = []
        do {
            let merged = try HistoryReader.readMerged(directory: run.historyDirectory)
            events = merged.events
            if !merged.truncatedFiles.isEmpty {
                notes.append("a partial last line was skipped in \(merged.truncatedFiles.joined(separator: ", ")) (a process killed mid-write)")
            }
            try writeMergedHistory(events)
        } catch {
            notes.append("cannot merge the histories: \(error)")
        }

        var outcome = CheckOutcome(verdict: .unknown)
        if !interrupted {
            outcome = await configuration.check(run)
            notes += outcome.notes
        }
        let exhausted = await supervisor.exhausted
        if !exhausted.isEmpty { notes.append("restart budget exhausted: \(exhausted.joined(separator: ", "))") }
        if let undrained, !undrained.isEmpty, !interrupted {
            notes.append("not every node drained within \(configuration.scenario.drainTimeout) s: \(undrained.joined(separator: ", "))")
            showLogTails(of: undrained)
        }
        // An invalid history stays invalid; otherwise anything the launcher could not vouch for makes it unknown.
        var verdict = outcome.verdict
        if verdict == .valid && (!exhausted.isEmpty || !drainedAll || interrupted) { verdict = .unknown }

        let hostileNames = configuration.scenario.hostileGroupNames
        let timeline = RunReport.readTimeline(path: run.timelineFile)
        let last = timeline.last
        let counts = Self.counts(stores: outcome.counts, history: events, lastSample: last)
        let samples = SyncLatency.samples(in: events)
        let drainStart = SyncLatency.drainStart(in: events)
        var restarts: [String: Int] = [:]
        for name in await supervisor.names {
            let count = await supervisor.restarts(of: name)
            if count > 0 { restarts[name] = count }
        }
        let applied: [AppliedFault] = mutable.withLock { state in
            (state.applied + Array(state.active.values)).sorted { ($0.start, $0.kind) < ($1.start, $1.kind) }
        }
        var summary = RunSummary(
            scenario: configuration.scenario.name, seed: configuration.seed, replay: configuration.replay, runDirectory: run.path,
            startedAt: started,
            durations: .init(run: runSeconds, drain: drainSeconds, total: configuration.wall.secondsSince1970 - started),
            devices: configuration.plan.nodes.filter { !configuration.scenario.nonDeviceGroupNames.contains($0.group) }.reduce(0) { $0 + $1.devices.count },
            nodeProcesses: configuration.plan.nodes.count,
            counts: counts,
            signedPerSecond: runSeconds > 0 ? Double(counts.signed) / runSeconds : 0,
            syncedPerSecond: runSeconds > 0 ? Double(counts.synced) / runSeconds : 0,
            syncAck: .init(samples.map(\.seconds)),
            syncAckRun: drainStart.map { start in .init(samples.filter { $0.start < start }.map(\.seconds)) },
            syncAckDrain: drainStart.map { start in .init(samples.filter { $0.start >= start }.map(\.seconds)) },
            faults: applied, restarts: restarts, totalRestarts: restarts.values.reduce(0, +), exhausted: exhausted,
            drained: state.drained.intersection(configuration.plan.nodes.map(\.process)).count, interrupted: interrupted,
            verdict: verdict, anomalies: outcome.anomalies.count, notes: notes,
            anomalyKinds: outcome.anomalies.reduce(into: [:]) { $0[$1.kind, default: 0] += 1 })
        if !hostileNames.isEmpty {
            do {
                summary.hostile = HostileTally(try HostileLog.read(directory: run.hostileDirectory).attempts)
            } catch {
                notes.append("cannot read the hostile groups' log: \(error)")
                summary.notes = notes
            }
        }
        RunChecks.apply(configuration.scenario.checks, to: &summary)
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            try encoder.encode(summary).write(to: URL(fileURLWithPath: run.summaryFile))
            try RunReport(summary: summary, timeline: timeline, anomalies: outcome.anomalies, scenarioText: configuration.scenarioText)
                .write(to: run.reportFile)
        } catch {
            message("error: cannot write the summary or the report: \(error)")
        }
        return LaunchResult(run: run, summary: summary, exitCode: RunChecks.exitCode(summary))
    }

    /// The run's counts from what lasts: the device stores (what is queued, acknowledged, pending:
    /// a node killed right after a commit has not reported it yet) and the histories (composed,
    /// cancelled, declined). Only push failures come from the nodes' stats lines; without the
    /// checker's counts (it could not run) everything does.
    static func counts(stores: CheckCounts?, history events: [HistoryEvent], lastSample: TimelineSample?) -> RunSummary.Counts {
        var counts = RunSummary.Counts()
        counts.syncFailures = lastSample?.syncFailures ?? 0
        guard let stores else {
            counts.composed = lastSample?.composed ?? 0
            counts.signed = lastSample?.signed ?? 0
            counts.cancelled = lastSample?.cancelled ?? 0
            counts.declined = lastSample?.declined ?? 0
            counts.synced = lastSample?.synced ?? 0
            counts.pending = lastSample?.pending ?? 0
            return counts
        }
        let outcomes = events.filter { $0.type == .ok && $0.op == .sign }.compactMap { $0.details?["outcome"] }
        counts.declined = outcomes.filter { $0 == "declined" }.count
        counts.cancelled = outcomes.filter { $0 == "cancelled" }.count
        // Every outbox item is a signed or a declined envelope.
        counts.signed = max(0, stores.signed - counts.declined)
        counts.synced = stores.acknowledged
        counts.pending = stores.pending
        let composed = events.filter { $0.type == .ok && $0.op == .compose }.count
        counts.composed = max(composed, stores.signed + counts.cancelled)
        return counts
    }

    func writeMergedHistory(_ events: [HistoryEvent]) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        var data = Data()
        for event in events {
            data.append(try encoder.encode(event))
            data.append(UInt8(ascii: "\n"))
        }
        try data.write(to: URL(fileURLWithPath: run.historyFile))
    }

    /// Prints the last lines of each named process's log (`logs/<name>.log`): a node that did not
    /// drain logs `still draining` with what its devices are doing (NodeHost), and that is what the
    /// operator, or a failing test's output, needs to see.
    func showLogTails(of processes: [String], lines count: Int = 12) {
        // A few are enough to see why; a fleet of many nodes all stuck would flood the terminal.
        for name in processes.prefix(3) {
            let path = run.logsDirectory + "/\(name).log"
            // The tail of a log that may be large: its last 16 KiB are enough for a dozen lines.
            guard let handle = FileHandle(forReadingAtPath: path), let end = try? handle.seekToEnd() else {
                message("\(name) did not drain; no log at \(path)")
                continue
            }
            try? handle.seek(toOffset: end - min(end, 16 * 1024))
            let data = (try? handle.readToEnd()) ?? Data()
            try? handle.close()
            let tail = String(decoding: data, as: UTF8.self).split(separator: "\n").suffix(count)
            message("\(name) did not drain; the last lines of logs/\(name).log:\n" + tail.map { "  " + $0 }.joined(separator: "\n"))
        }
    }
}
