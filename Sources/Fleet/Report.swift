import Foundation

/// One anomaly as the report shows it: what kind, what it means, and its witness.
public struct ReportAnomaly: Sendable, Hashable {
    public var kind: String
    public var message: String
    /// The minimal evidence (history events, store rows), as text.
    public var witness: String

    public init(kind: String, message: String, witness: String) {
        self.kind = kind
        self.message = message
        self.witness = witness
    }
}

/// `report.html`: one self-contained file (inline CSS and SVG, no scripts, nothing
/// loaded from elsewhere) that a person opens in a browser: the verdict, the
/// scenario's checks (expected verdict, thresholds), the anomalies with their
/// witnesses, plots of the run with the fault windows shaded, the faults applied, and
/// the scenario with its seed.
public struct RunReport: Sendable {
    public var summary: RunSummary
    public var timeline: [TimelineSample]
    public var anomalies: [ReportAnomaly]
    /// The scenario file as run (with its seed).
    public var scenarioText: String

    public init(summary: RunSummary, timeline: [TimelineSample], anomalies: [ReportAnomaly], scenarioText: String) {
        self.summary = summary
        self.timeline = timeline
        self.anomalies = anomalies
        self.scenarioText = scenarioText
    }

    /// Reads `timeline.jsonl` (bounded; a partial last line is skipped).
    public static func readTimeline(path: String, maxSamples: Int = 1_000_000) -> [TimelineSample] {
        guard let data = FileManager.default.contents(atPath: path) else { return [] }
        let decoder = JSONDecoder()
        var samples: [TimelineSample] = []
        for line in data.split(separator: UInt8(ascii: "\n")) where samples.count < maxSamples {
            if let sample = try? decoder.decode(TimelineSample.self, from: line) { samples.append(sample) }
        }
        return samples
    }

    public func write(to path: String) throws {
        try Data(html().utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
    }

    public func html() -> String {
        let s = summary
        let xMax = max(timeline.last?.time ?? 0, s.durations.run + s.durations.drain, 1)
        let rates = Self.rates(timeline)
        let charts = [
            ReportChart(
                id: "throughput", title: "Throughput: envelopes signed and synced per second", unit: "per second",
                series: [
                    .init(name: "signed/s", color: "#2b6cb0", points: rates.signed),
                    .init(name: "synced/s", color: "#2f855a", points: rates.synced),
                ], faults: s.faults, xMax: xMax),
            ReportChart(
                id: "latency", title: "Sync-ack latency (p50 of nodes, worst node's p99)", unit: "ms",
                series: [
                    .init(name: "p50", color: "#2b6cb0", points: timeline.compactMap { t in t.syncAckP50.map { (t.time, $0 * 1000) } }),
                    .init(name: "p99", color: "#c53030", points: timeline.compactMap { t in t.syncAckP99.map { (t.time, $0 * 1000) } }),
                ], faults: s.faults, xMax: xMax),
            ReportChart(
                id: "devices", title: "Devices online and offline", unit: "devices",
                series: [
                    .init(name: "online", color: "#2f855a", points: timeline.map { ($0.time, Double($0.online)) }),
                    .init(name: "offline", color: "#b7791f", points: timeline.map { ($0.time, Double($0.offline)) }),
                ], faults: s.faults, xMax: xMax),
            ReportChart(
                id: "outbox", title: "Outbox depth (items waiting for a sync ack, all devices)", unit: "items",
                series: [.init(name: "pending", color: "#6b46c1", points: timeline.map { ($0.time, Double($0.pending)) })],
                faults: s.faults, xMax: xMax),
        ]
        let e = ReportChart.escape
        func ms(_ value: Double?) -> String { value.map { String(format: "%.1f ms", $0 * 1000) } ?? "–" }

        var body = """
            <h1>SignFleet run: \(e(s.scenario))</h1>
            <p class="verdict \(e(s.verdict.rawValue))">verdict: <strong>\(e(s.verdict.rawValue))</strong> \
            (\(s.anomalies) anomal\(s.anomalies == 1 ? "y" : "ies"))</p>
            <p>seed <code>\(s.seed)</code> · replay: <code>\(e(s.replay))</code><br>
            run directory <code>\(e(s.runDirectory))</code> · started \(e(Self.timestamp(s.startedAt)))</p>

            """
        if !s.notes.isEmpty {
            body += "<ul class=\"notes\">" + s.notes.map { "<li>\(e($0))</li>" }.joined() + "</ul>\n"
        }
        body += """
            <table class="figures">
            <tr><th>devices</th><td>\(s.devices) in \(s.nodeProcesses) node processes</td></tr>
            <tr><th>envelopes</th><td>composed \(s.counts.composed) · signed \(s.counts.signed) · synced \(s.counts.synced) · \
            cancelled \(s.counts.cancelled) · declined \(s.counts.declined) · pending \(s.counts.pending)</td></tr>
            <tr><th>rates</th><td>\(String(format: "%.2f", s.signedPerSecond)) signed/s · \(String(format: "%.2f", s.syncedPerSecond)) synced/s</td></tr>
            <tr><th>sync-ack latency</th><td>p50 \(ms(s.syncAck.p50)) · p99 \(ms(s.syncAck.p99)) · max \(ms(s.syncAck.max)) \
            (\(s.syncAck.samples) syncs)</td></tr>
            \(Self.latencyRow("… while the scenario ran", s.syncAckRun))\(Self.latencyRow("… in the drain", s.syncAckDrain))
            <tr><th>durations</th><td>run \(String(format: "%.1f", s.durations.run)) s · drain \(String(format: "%.1f", s.durations.drain)) s · \
            total \(String(format: "%.1f", s.durations.total)) s</td></tr>
            <tr><th>restarts</th><td>\(s.totalRestarts) unexpected\(s.exhausted.isEmpty ? "" : " · budget exhausted: " + e(s.exhausted.joined(separator: ", ")))</td></tr>
            <tr><th>drained</th><td>\(s.drained) of \(s.nodeProcesses) node processes</td></tr>
            </table>

            """
        body += checksSection()
        body += hostileSection()
        body += anomaliesSection()
        body += "<h2>Over time</h2>\n<p>Shaded bands are fault windows.</p>\n"
        body += charts.map { "<figure>\($0.svg())</figure>" }.joined(separator: "\n")
        body += "\n<h2>Faults applied</h2>\n"
        if s.faults.isEmpty {
            body += "<p>None.</p>\n"
        } else {
            body += "<table class=\"faults\"><tr><th>fault</th><th>targets</th><th>from</th><th>to</th></tr>\n"
            for fault in s.faults {
                body += "<tr><td>\(e(fault.kind))</td><td>\(e(ProcessNames.compact(fault.targets)))</td>"
                body += "<td>\(String(format: "%.1f", fault.start)) s</td><td>\(fault.end.map { String(format: "%.1f s", $0) } ?? "end")</td></tr>\n"
            }
            body += "</table>\n"
        }
        body += "<h2>Scenario</h2>\n<pre class=\"scenario\">\(e(scenarioText))</pre>\n"
        return """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8">
            <title>SignFleet \(e(s.scenario)) — \(e(s.verdict.rawValue))</title>
            <style>\(Self.css)</style></head>
            <body>
            \(body)
            </body></html>

            """
    }

    /// The scenario's checks: the expected verdict and each threshold with its observed value.
    func checksSection() -> String {
        let s = summary
        let e = ReportChart.escape
        let met = s.verdict == s.expectedVerdict
        var html = "<h2>Checks</h2>\n<p class=\"checks \(s.checksPassed ? "pass" : "fail")\">"
        html += "expected verdict <strong>\(e(s.expectedVerdict.rawValue))</strong>: \(met ? "met" : "not met") · "
        html += s.thresholds.isEmpty ? "no thresholds" : "\(s.thresholds.filter(\.passed).count) of \(s.thresholds.count) thresholds held"
        html += "</p>\n"
        guard !s.thresholds.isEmpty else { return html }
        html += "<table class=\"thresholds\"><tr><th>threshold</th><th>observed</th><th>result</th></tr>\n"
        for result in s.thresholds {
            let metric = (try? FleetThreshold.parse(result.threshold))?.metric
            let observed = metric?.format(result.actual) ?? result.actual.map { "\($0)" } ?? "no data"
            html += "<tr class=\"\(result.passed ? "pass" : "fail")\"><td><code>\(e(result.threshold))</code></td>"
            html += "<td>\(e(observed))</td><td>\(result.passed ? "pass" : "FAIL")</td></tr>\n"
        }
        return html + "</table>\n"
    }

    /// How many anomalies of one kind the report shows with their witnesses; check.json has them all.
    static let anomaliesShownPerKind = 20

    /// The anomalies: a count per kind, then the first ``anomaliesShownPerKind`` of each kind with
    /// their witnesses, so a run with thousands of them (10,000 devices that did not drain) stays a
    /// page a person can read.
    func anomaliesSection() -> String {
        let e = ReportChart.escape
        guard !anomalies.isEmpty else { return "<h2>Anomalies</h2>\n<p>None found.</p>\n" }
        var kinds: [String] = []
        var byKind: [String: [ReportAnomaly]] = [:]
        for anomaly in anomalies {
            if byKind[anomaly.kind] == nil { kinds.append(anomaly.kind) }
            byKind[anomaly.kind, default: []].append(anomaly)
        }
        var html = "<h2>Anomalies</h2>\n<table class=\"anomaly-kinds\"><tr><th>kind</th><th>count</th></tr>\n"
        for kind in kinds { html += "<tr><td>\(e(kind))</td><td>\(byKind[kind]?.count ?? 0)</td></tr>\n" }
        html += "</table>\n<table class=\"anomalies\"><tr><th>kind</th><th>what</th><th>witness</th></tr>\n"
        for kind in kinds {
            let all = byKind[kind] ?? []
            for anomaly in all.prefix(Self.anomaliesShownPerKind) {
                html += "<tr><td>\(e(anomaly.kind))</td><td>\(e(anomaly.message))</td><td><pre>\(e(anomaly.witness))</pre></td></tr>\n"
            }
            if all.count > Self.anomaliesShownPerKind {
                html += "<tr><td>\(e(kind))</td><td colspan=\"2\">… and \(all.count - Self.anomaliesShownPerKind) more of this kind "
                html += "(<code>check.json</code> lists every one)</td></tr>\n"
            }
        }
        return html + "</table>\n"
    }

    /// What the hostile groups tried, and what the coordinator answered; the verdict above covers
    /// the honest devices.
    func hostileSection() -> String {
        guard let tally = summary.hostile else { return "" }
        let e = ReportChart.escape
        var html = "<h2>Hostile groups</h2>\n<p>\(tally.attempts) attempts; "
        html += tally.breaches == 0 ? "none got through.</p>\n" : "<strong>\(tally.breaches) got through</strong> (hostile-breach anomalies).</p>\n"
        html += "<table class=\"hostile\"><tr><th>behaviour</th><th>attempt</th><th>tries</th><th>answers</th><th>got through</th></tr>\n"
        for line in tally.lines {
            let answers = line.results.sorted { ($1.value, $0.key) < ($0.value, $1.key) }.map { "\($0.key) \($0.value)" }.joined(separator: " · ")
            html += "<tr class=\"\(line.breaches > 0 ? "fail" : "pass")\"><td>\(e(line.behaviour.rawValue))</td><td><code>\(e(line.action))</code></td>"
            html += "<td>\(line.attempts)</td><td>\(e(answers))</td><td>\(line.breaches)</td></tr>\n"
        }
        return html + "</table>\n"
    }

    /// Signed and synced per second between consecutive samples.
    /// A row of the summary table for part of the syncs (nothing without a split: an interrupted run).
    static func latencyRow(_ title: String, _ latency: RunSummary.Latency?) -> String {
        guard let latency else { return "" }
        func ms(_ value: Double?) -> String { value.map { String(format: "%.1f ms", $0 * 1000) } ?? "–" }
        return "<tr><th>\(title)</th><td>p50 \(ms(latency.p50)) · p99 \(ms(latency.p99)) · max \(ms(latency.max)) (\(latency.samples) syncs)</td></tr>\n"
    }

    static func rates(_ timeline: [TimelineSample]) -> (signed: [(x: Double, y: Double)], synced: [(x: Double, y: Double)]) {
        var signed: [(x: Double, y: Double)] = []
        var synced: [(x: Double, y: Double)] = []
        guard var previous = timeline.first else { return ([], []) }
        // Spans under half a second (the last sample right after the drain) would make spikes.
        for current in timeline.dropFirst() where current.time - previous.time >= 0.5 {
            let span = current.time - previous.time
            signed.append((current.time, max(0, Double(current.signed - previous.signed)) / span))
            synced.append((current.time, max(0, Double(current.synced - previous.synced)) / span))
            previous = current
        }
        return (signed, synced)
    }

    static func timestamp(_ seconds: Double) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.string(from: Date(timeIntervalSince1970: seconds))
    }

    static let css = """
        body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:960px;color:#1a202c}
        h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #e2e8f0}
        code,pre{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}
        pre{background:#f7fafc;padding:8px;overflow-x:auto;white-space:pre-wrap}
        .verdict{font-size:18px;padding:8px 12px;border-radius:4px;display:inline-block}
        .verdict.valid{background:#c6f6d5}.verdict.invalid{background:#fed7d7}.verdict.unknown{background:#fefcbf}
        table{border-collapse:collapse;margin:8px 0}th,td{text-align:left;padding:4px 10px;border-bottom:1px solid #edf2f7;vertical-align:top}
        .checks.pass{color:#276749}.checks.fail{color:#9b2c2c}tr.fail td{background:#fff5f5}
        figure{margin:12px 0}
        svg.chart{background:#fff;font-size:11px}
        svg .title{font-size:13px;font-weight:600}
        svg .grid{stroke:#edf2f7}svg .frame{fill:none;stroke:#a0aec0}
        svg .series{fill:none;stroke-width:1.8}
        svg .fault rect{fill:#f56565;fill-opacity:.12;stroke:#f56565;stroke-opacity:.4}
        svg .fault text{fill:#9b2c2c;font-size:10px}
        svg .tick,svg .legend{fill:#4a5568}
        """
}
