import FleetTesting
import Foundation
import Testing

@testable import Fleet

@Suite struct FleetStatsAggregatorTests {
    @Test func countersSurviveANodeRestartAndDownNodesCountOffline() {
        var aggregator = FleetStatsAggregator(devicesPerProcess: ["node-a-1": 2, "node-b-1": 3])
        aggregator.record(NodeStats(time: 1, devices: 2, online: 2, offline: 0, composed: 5, signed: 4, synced: 3, pending: 1), from: "node-a-1")
        aggregator.record(NodeStats(time: 1, devices: 3, online: 1, offline: 2, composed: 2, signed: 2, synced: 0, pending: 2, syncAckP50: 0.02, syncAckP99: 0.2), from: "node-b-1")
        var sample = aggregator.sample(time: 1, activeFaults: [])
        #expect((sample.devices, sample.online, sample.offline) == (5, 3, 2))
        #expect((sample.composed, sample.signed, sample.synced, sample.pending) == (7, 6, 3, 3))
        #expect(sample.syncAckP99 == 0.2)

        // node-a-1 is killed: its devices count offline, its counts stay.
        aggregator.setUnavailable("node-a-1", true)
        sample = aggregator.sample(time: 2, activeFaults: ["kill-node node-a-1"])
        #expect((sample.online, sample.offline) == (1, 4))
        #expect(sample.signed == 6)
        #expect(sample.syncAckP99 == nil, "latencies only from lines since the previous sample")
        #expect(sample.activeFaults == ["kill-node node-a-1"])

        // It restarts and counts from zero again: the fleet's totals do not go backwards.
        aggregator.setUnavailable("node-a-1", false)
        aggregator.record(NodeStats(time: 3, devices: 2, online: 2, offline: 0, composed: 1, signed: 1, synced: 4, pending: 0), from: "node-a-1")
        sample = aggregator.sample(time: 3, activeFaults: [])
        #expect((sample.composed, sample.signed, sample.synced) == (5 + 1 + 2, 4 + 1 + 2, 3 + 4 + 0))
        #expect(sample.online == 3)
    }

    @Test func syncLatenciesPairEachOkWithItsDevicesInvoke() {
        let events = [
            HistoryEvent(time: 1.0, process: "n", type: .invoke, op: .sync, device: "a"),
            HistoryEvent(time: 1.1, process: "n", type: .invoke, op: .sync, device: "b"),
            HistoryEvent(time: 1.3, process: "n", type: .ok, op: .sync, device: "a"),
            HistoryEvent(time: 1.5, process: "n", type: .info, op: .sync, device: "b"),
            HistoryEvent(time: 2.0, process: "n", type: .ok, op: .sync, device: "b"),
            HistoryEvent(time: 3.0, process: "n", type: .invoke, op: .sync, device: "b"),
            HistoryEvent(time: 3.5, process: "n", type: .ok, op: .sync, device: "b"),
        ]
        let latencies = SyncLatency.latencies(in: events)
        #expect(latencies.count == 2)
        #expect(abs(latencies[0] - 0.3) < 1e-9 && abs(latencies[1] - 0.5) < 1e-9)
        #expect(SyncLatency.percentile([5, 1, 4, 2, 3], 0.5) == 3)
        #expect(SyncLatency.percentile([5, 1, 4, 2, 3], 0.99) == 5)
        #expect(SyncLatency.percentile([], 0.5) == nil)
    }

    /// The drain starts at the launcher's final heal: syncs invoked from then on are the drain's.
    @Test func syncLatenciesSplitAtTheDrain() {
        let events = [
            HistoryEvent(time: 1.0, process: "n", type: .invoke, op: .sync, device: "a"),
            HistoryEvent(time: 1.2, process: "n", type: .ok, op: .sync, device: "a"),
            HistoryEvent(time: 4.0, process: "launcher", type: .ok, op: .heal, details: ["phase": "stop"]),
            HistoryEvent(time: 4.5, process: "n", type: .invoke, op: .sync, device: "b"),
            HistoryEvent(time: 5.0, process: "launcher", type: .ok, op: .heal, details: ["phase": "final"]),
            HistoryEvent(time: 5.5, process: "n", type: .ok, op: .sync, device: "b"),
            HistoryEvent(time: 6.0, process: "n", type: .invoke, op: .sync, device: "a"),
            HistoryEvent(time: 8.0, process: "n", type: .ok, op: .sync, device: "a"),
        ]
        let start = SyncLatency.drainStart(in: events)
        #expect(start == 5.0)
        let samples = SyncLatency.samples(in: events)
        let run = RunSummary.Latency(samples.filter { $0.start < 5.0 }.map(\.seconds))
        let drain = RunSummary.Latency(samples.filter { $0.start >= 5.0 }.map(\.seconds))
        #expect(run.samples == 2 && drain.samples == 1)
        #expect(abs((run.max ?? 0) - 1.0) < 1e-9, "b started before the drain and took 1 s")
        #expect(drain.p99 == 2.0)
        #expect(SyncLatency.drainStart(in: Array(events.prefix(4))) == nil, "no final heal: no split")
    }

    @Test func theProgressLineShowsCountsRatesAndFaults() {
        let previous = TimelineSample(time: 10, devices: 20, online: 18, offline: 2, composed: 40, signed: 30, synced: 20, pending: 10)
        let current = TimelineSample(
            time: 12, devices: 20, online: 15, offline: 5, composed: 44, signed: 36, synced: 24, pending: 12, syncAckP99: 0.25,
            activeFaults: ["kill-node node-a-1", "toxic latency node-b-1"])
        let line = ProgressLine.render(current, previous: previous, phase: "run", duration: 60)
        #expect(line.contains("devices 15 online 5 offline"))
        #expect(line.contains("composed 44 signed 36 synced 24 pending 12"))
        #expect(line.contains("3.0 signed/s 2.0 synced/s"))
        #expect(line.contains("ack p99 250ms"))
        #expect(line.contains("faults: kill-node node-a-1, toxic latency node-b-1"))
    }
}

@Suite struct ReportRenderTests {
    static func sampleReport() -> RunReport {
        var timeline: [TimelineSample] = []
        for second in 0...40 {
            let t = Double(second)
            timeline.append(
                TimelineSample(
                    time: t, devices: 20, online: second >= 10 && second < 20 ? 12 : 20, offline: second >= 10 && second < 20 ? 8 : 0,
                    composed: second * 3, signed: second * 3 - min(second, 3), synced: max(0, second * 3 - 6), pending: min(second, 6),
                    syncAckP50: 0.01 + Double(second % 5) / 1000, syncAckP99: 0.05 + Double(second % 7) / 100,
                    activeFaults: second >= 10 && second < 20 ? ["kill-node node-a-1"] : []))
        }
        let summary = RunSummary(
            scenario: "smoke", seed: 42, replay: "signfleet fleet run smoke --seed 42", runDirectory: "runs/x", startedAt: 0,
            durations: .init(run: 30, drain: 10, total: 42), devices: 20, nodeProcesses: 2, counts: RunSummary.Counts(),
            signedPerSecond: 3, syncedPerSecond: 2.9, syncAck: .init(samples: 100, p50: 0.012, p99: 0.09, max: 0.2),
            faults: [
                AppliedFault(kind: "kill-node", targets: ["node-a-1"], start: 10, end: 20),
                AppliedFault(kind: "toxic latency", targets: ["node-b-1"], start: 22, end: 28),
            ],
            restarts: [:], totalRestarts: 0, exhausted: [], drained: 2, interrupted: false, verdict: .invalid, anomalies: 1,
            notes: [])
        return RunReport(
            summary: summary, timeline: timeline,
            anomalies: [ReportAnomaly(kind: "lost", message: "signed on a-1 (seq 3), never on the server", witness: "{\"op\":\"sign\" <x>}")],
            scenarioText: "name: smoke\nseed: 42\n")
    }

    @Test func theReportIsSelfContainedWithEveryPlotAndEscapesText() {
        let html = Self.sampleReport().html()
        for id in ["throughput", "latency", "devices", "outbox"] {
            #expect(html.contains("<svg class=\"chart\" id=\"\(id)\""), "missing plot \(id)")
        }
        #expect(html.components(separatedBy: "<polyline").count - 1 == 7, "2 + 2 + 2 + 1 series")
        #expect(html.contains("kill-node node-a-1") && html.contains("toxic latency node-b-1"))
        #expect(html.contains("&lt;x&gt;"), "witness text is escaped")
        // Nothing loaded from elsewhere (the only URL is the SVG namespace, which loads nothing).
        let withoutNamespace = html.replacingOccurrences(of: "xmlns=\"http://www.w3.org/2000/svg\"", with: "")
        for external in ["<script", "<link", "src=", "href=", "url(", "http://", "https://", "@import"] {
            #expect(!withoutNamespace.contains(external), "the report refers to something outside: \(external)")
        }
    }

    /// Renders the report in headless Chromium: the DOM it built has the four plots
    /// with their lines and the shaded fault windows, and the screenshot is a real picture.
    @Test(.timeLimit(.minutes(5))) func chromiumRendersThePlots() async throws {
        let chromium = try #require(
            ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first { FileManager.default.isExecutableFile(atPath: $0) },
            "chromium is not installed (scripts/install-deps.sh installs it)")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("report-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let report = directory + "/report.html"
        try Self.sampleReport().write(to: report)
        let common = ["--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=\(directory)/profile"]

        let dump = try ChildProcess.launch(chromium, common + ["--dump-dom", "file://\(report)"], name: "chromium-dom")
        #expect(try await dump.waitForExit(timeout: .seconds(45)) == 0, "\(dump.output)")
        let dom = dump.lines(.standardOutput).joined(separator: "\n")
        for id in ["throughput", "latency", "devices", "outbox"] {
            #expect(dom.contains("id=\"\(id)\""), "the rendered DOM lacks plot \(id)")
        }
        #expect(dom.components(separatedBy: "<polyline").count - 1 == 7)
        #expect(dom.components(separatedBy: "class=\"fault\"").count - 1 == 8, "2 fault windows on each of 4 plots")

        let png = directory + "/report.png"
        let shot = try ChildProcess.launch(
            chromium, common + ["--screenshot=\(png)", "--window-size=1000,2200", "file://\(report)"], name: "chromium-shot")
        #expect(try await shot.waitForExit(timeout: .seconds(45)) == 0, "\(shot.output)")
        let data = try Data(contentsOf: URL(fileURLWithPath: png))
        #expect(data.starts(with: [0x89, 0x50, 0x4E, 0x47]), "a PNG")
        #expect(data.count > 20_000, "a screenshot of plots is more than a blank page (\(data.count) bytes)")
    }
}
