import Foundation

/// The self-contained HTML report: figures, thresholds, latency over time and the percentile
/// distribution (corrected vs uncorrected), all inline SVG — nothing is loaded from outside.
enum HTMLReport {
    static func render(_ summary: LoadSummary, command: String?) -> String {
        let verdict = summary.passed ? "<span class=\"pass\">PASS</span>" : "<span class=\"fail\">FAIL</span>"
        var html = """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8"><title>SignFleet load report</title>
            <style>
            body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:900px}
            table{border-collapse:collapse;margin:8px 0 16px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
            th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}.pass{color:#070;font-weight:bold}.fail{color:#b00;font-weight:bold}
            code{background:#f4f4f4;padding:1px 4px}svg{display:block;margin:12px 0}
            </style></head><body>
            <h1>SignFleet load report \(verdict)</h1>

            """
        if let command { html += "<p>Command: <code>\(escape(command))</code></p>\n" }
        html += "<p>Started \(ISO8601DateFormatter().string(from: summary.startedAt)); seed <code>\(summary.seed)</code>; profile <code>\(escape(summary.profile.joined(separator: " ")))</code> (\(summary.process) arrivals); \(summary.devices) devices, at most \(summary.maxOutstandingPerDevice) outstanding each.</p>\n"
        if let aborted = summary.abortedBy { html += "<p class=\"fail\">Stopped early: threshold <code>\(escape(aborted))</code> failed.</p>\n" }
        if summary.interrupted { html += "<p class=\"fail\">Stopped early: interrupted (SIGINT/SIGTERM).</p>\n" }
        html += "<table><tr><th>arrivals</th><th>offered/s</th><th>completed</th><th>throughput/s</th><th>errors</th><th>dropped</th><th>unfinished</th><th>seconds</th></tr>"
        html += "<tr><td>\(summary.arrivals)</td><td>\(n(summary.offeredRate))</td><td>\(summary.completed)</td><td>\(n(summary.throughput))</td><td>\(summary.errorCount)</td><td>\(summary.dropped)</td><td>\(summary.unfinished)</td><td>\(n(summary.seconds))</td></tr></table>\n"

        html += "<h2>Latency (ms)</h2><p>Corrected: from each ceremony's intended start (coordinated omission corrected). Uncorrected: from when its device began it.</p>\n"
        html += "<table><tr><th></th><th>count</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th><th>mean</th></tr>"
        var rows = [("corrected", summary.corrected), ("uncorrected", summary.uncorrected)]
        for step in summary.stepOrder { if let stats = summary.steps[step] { rows.append(("step: \(step)", stats)) } }
        rows.append(("generator dispatch lag", summary.dispatchLag))
        for (name, s) in rows {
            html += "<tr><td>\(escape(name))</td><td>\(s.count)</td><td>\(n(s.p50))</td><td>\(n(s.p90))</td><td>\(n(s.p99))</td><td>\(n(s.p999))</td><td>\(n(s.max))</td><td>\(n(s.mean))</td></tr>"
        }
        html += "</table>\n"

        html += "<h2>Stages</h2><table><tr><th>stage</th><th>arrivals</th><th>completed</th><th>errors</th><th>dropped</th><th>p99 corrected</th><th>p99 uncorrected</th></tr>"
        for stage in summary.stages {
            html += "<tr><td>\(escape(stage.stage))</td><td>\(stage.arrivals)</td><td>\(stage.completed)</td><td>\(stage.errors)</td><td>\(stage.dropped)</td><td>\(n(stage.corrected.p99))</td><td>\(n(stage.uncorrected.p99))</td></tr>"
        }
        html += "</table>\n"

        if !summary.thresholds.isEmpty {
            html += "<h2>Thresholds</h2><table><tr><th>threshold</th><th>actual</th><th>verdict</th></tr>"
            for result in summary.thresholds {
                let verdict = result.passed ? "<span class=\"pass\">pass</span>" : "<span class=\"fail\">fail</span>"
                html += "<tr><td><code>\(escape(result.threshold))</code></td><td>\(result.actual.map(n) ?? "no data")</td><td>\(verdict)</td></tr>"
            }
            html += "</table>\n"
        }
        if !summary.errors.isEmpty {
            html += "<h2>Errors by type</h2><table><tr><th>type</th><th>count</th></tr>"
            for (kind, count) in summary.errors.sorted(by: { $0.key < $1.key }) { html += "<tr><td>\(escape(kind))</td><td>\(count)</td></tr>" }
            html += "</table>\n"
        }

        html += auditSection(summary.audit)

        let mid = summary.intervals.map { $0.start + $0.length / 2 }
        func over(_ value: (LoadSummary.Interval) -> Double) -> [(x: Double, y: Double)] {
            zip(mid, summary.intervals).filter { $0.1.completed > 0 }.map { (x: $0.0, y: value($0.1)) }
        }
        html += "<h2>Latency over time</h2>\n"
        html += SVGChart(
            title: "Latency per interval (by completion time)", xLabel: "seconds", yLabel: "ms",
            series: [
                .init(name: "corrected p99", color: "#c0392b", points: over { $0.corrected.p99 }),
                .init(name: "corrected p50", color: "#e67e22", points: over { $0.corrected.p50 }),
                .init(name: "uncorrected p99", color: "#2c3e90", points: over { $0.uncorrected.p99 }, dashed: true),
                .init(name: "uncorrected p50", color: "#16a085", points: over { $0.uncorrected.p50 }, dashed: true),
            ]).render()
        html += SVGChart(
            title: "Throughput per interval", xLabel: "seconds", yLabel: "per second",
            series: [
                .init(name: "completed/s", color: "#27ae60", points: zip(mid, summary.intervals).map { (x: $0.0, y: Double($0.1.completed) / $0.1.length) }),
                .init(name: "errors/s", color: "#c0392b", points: zip(mid, summary.intervals).map { (x: $0.0, y: Double($0.1.errors) / $0.1.length) }),
                .init(name: "dropped/s", color: "#8e44ad", points: zip(mid, summary.intervals).map { (x: $0.0, y: Double($0.1.dropped) / $0.1.length) }, dashed: true),
            ]).render()

        // HdrHistogram's usual view: x = 1/(1 − percentile) on a log scale.
        func logX(_ points: [LoadSummary.Point]) -> [(x: Double, y: Double)] {
            points.filter { $0.percentile < 100 }.map { (x: log10(1 / (1 - $0.percentile / 100)), y: $0.milliseconds) }
        }
        let ticks: [(Double, String)] = [(0, "0%"), (1, "90%"), (2, "99%"), (3, "99.9%"), (4, "99.99%"), (5, "99.999%")]
        html += "<h2>Percentile distribution</h2>\n"
        html += SVGChart(
            title: "Latency by percentile", xLabel: "percentile", yLabel: "ms",
            series: [
                .init(name: "corrected", color: "#c0392b", points: logX(summary.correctedDistribution)),
                .init(name: "uncorrected", color: "#2c3e90", points: logX(summary.uncorrectedDistribution), dashed: true),
            ], xTicks: ticks).render()
        html += "\n<p>Interval histograms: <code>latency.hlog</code> (HdrHistogram interval log, tags <code>corrected</code> and <code>uncorrected</code>, values in µs). Figures: <code>summary.json</code>.</p>\n</body></html>\n"
        return html
    }

    /// The integrity audit: counts per class and the witnesses kept.
    static func auditSection(_ audit: LoadAudit?) -> String {
        guard let audit else { return "<h2>Integrity audit</h2><p>Not run (<code>--no-audit</code>).</p>\n" }
        let verdict = audit.passed ? "<span class=\"pass\">PASS</span>" : "<span class=\"fail\">FAIL</span>"
        var html = "<h2>Integrity audit \(verdict)</h2><p>Every device's outbox against what the coordinator holds for it (<code>sync.results</code>), after the run's clock stopped (\(n(audit.seconds)) s, in no latency or throughput figure).</p>\n"
        html += "<table><tr><th>devices</th><th>items checked</th><th>acknowledged</th><th>rejected</th>"
        for kind in AuditAnomaly.Kind.allCases { html += "<th>\(kind.rawValue)</th>" }
        html += "</tr><tr><td>\(audit.devicesAudited)</td><td>\(audit.itemsChecked)</td><td>\(audit.acknowledged)</td><td>\(audit.rejected)</td>"
        for kind in AuditAnomaly.Kind.allCases {
            let count = audit.counts[kind.rawValue] ?? 0
            html += count > 0 && kind.isFailure ? "<td class=\"fail\">\(count)</td>" : "<td>\(count)</td>"
        }
        html += "</tr></table>\n"
        if let note = audit.unsyncedNote { html += "<p>\(escape(note))</p>\n" }
        for error in audit.errors { html += "<p class=\"fail\">\(escape(error.device)) could not be audited: \(escape(error.error))</p>\n" }
        if !audit.witnesses.isEmpty {
            html += "<table><tr><th>class</th><th>device</th><th>sequence</th><th>device holds</th><th>coordinator holds</th></tr>"
            for witness in audit.witnesses {
                html += "<tr><td>\(witness.kind.rawValue)</td><td>\(escape(witness.device))</td><td>\(witness.sequence.map(String.init) ?? "")</td><td>\(escape(witness.deviceHolds))</td><td>\(escape(witness.coordinatorHolds))</td></tr>"
            }
            html += "</table>\n"
        }
        return html
    }

    static func n(_ value: Double) -> String { String(format: value >= 100 ? "%.1f" : "%.2f", value) }
}

/// Writes a run's outputs into a directory: `summary.json`, `latency.hlog`, `report.html`.
public enum LoadReportWriter {
    public static func write(_ run: LoadRun, to directory: String, command: String? = nil) throws {
        let url = URL(fileURLWithPath: directory, isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        try run.summary.jsonData().write(to: url.appendingPathComponent("summary.json"))
        var log = HistogramLogWriter(startTime: run.summary.startedAt, comment: "signfleet load, seed \(run.summary.seed); values in microseconds")
        for interval in run.recorder.intervals {
            log.append(tag: "corrected", start: interval.start, length: interval.length, line: interval.correctedLog)
            log.append(tag: "uncorrected", start: interval.start, length: interval.length, line: interval.uncorrectedLog)
        }
        try Data(log.text.utf8).write(to: url.appendingPathComponent("latency.hlog"))
        try Data(HTMLReport.render(run.summary, command: command).utf8).write(to: url.appendingPathComponent("report.html"))
    }
}
