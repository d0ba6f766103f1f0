import Foundation
import Thresholds

/// One of a scenario's `checks.thresholds`, such as `lost == 0`, `pending == 0`,
/// `syncAck.p99 < 1s` or `synced >= 100`, checked against the run's summary once the
/// run has ended.
///
/// The grammar is `signfleet load`'s (module Thresholds): `METRIC OP VALUE` with OP one
/// of `<`, `<=`, `>`, `>=`, `==`, `!=`; the metrics are the summary's
/// (``FleetMetric/all``). Durations are written `200ms`, `1.5s`, `800us` (a bare number
/// is milliseconds, as in `signfleet load`) and compared in seconds, the summary's unit.
public struct FleetThreshold: Sendable, Hashable {
    /// The text as given (trimmed).
    public var source: String
    public var metric: FleetMetric
    public var comparison: ThresholdComparison
    /// In the metric's unit: a count, seconds, or per second.
    public var limit: Double

    /// Parses a threshold, refusing metric names the summary does not have.
    public static func parse(_ text: String) throws(ThresholdError) -> FleetThreshold {
        let expression = try ThresholdExpression.parse(text, comparisons: ThresholdComparison.allCases, example: "pending == 0")
        guard let metric = FleetMetric.named(expression.metric) else {
            let names = FleetMetric.all.map(\.name)
            throw ThresholdError(
                "unknown metric \"\(expression.metric)\"; known: \(names.joined(separator: ", "))"
                    + Suggestion.hint(for: expression.metric, in: names))
        }
        if expression.abortOnFail {
            throw ThresholdError("threshold \"\(text)\": abortOnFail is for signfleet load; a fleet's thresholds are checked once, at the end")
        }
        let limit: Double
        switch metric.unit {
        case .count: limit = try ThresholdValue.count(expression.value, in: text)
        case .seconds: limit = try ThresholdValue.milliseconds(expression.value, in: text) / 1000
        case .perSecond: limit = try ThresholdValue.perSecond(expression.value, in: text)
        }
        return FleetThreshold(source: expression.source, metric: metric, comparison: expression.comparison, limit: limit)
    }

    /// Checks the threshold; a metric without samples (no sync measured) fails.
    public func evaluate(_ summary: RunSummary) -> ThresholdResult {
        let actual = metric.value(in: summary)
        return ThresholdResult(threshold: source, actual: actual, passed: actual.map { comparison.holds($0, limit) } ?? false)
    }

    /// Evaluates every threshold text; one that no longer parses (the scenario was
    /// validated, so only a hand-edited one) fails with no value.
    public static func evaluate(_ texts: [String], against summary: RunSummary) -> [ThresholdResult] {
        texts.map { text in
            (try? parse(text))?.evaluate(summary) ?? ThresholdResult(threshold: text, actual: nil, passed: false)
        }
    }
}

/// A figure of `summary.json` a threshold can name.
public struct FleetMetric: Sendable, Hashable, CustomStringConvertible {
    public enum Unit: String, Sendable, Hashable {
        case count, seconds, perSecond
    }

    public var name: String
    public var unit: Unit
    /// Where it is in `summary.json`.
    public var meaning: String
    let read: @Sendable (RunSummary) -> Double?

    public var description: String { name }

    public func value(in summary: RunSummary) -> Double? { read(summary) }

    public static func == (a: FleetMetric, b: FleetMetric) -> Bool { a.name == b.name }
    public func hash(into hasher: inout Hasher) { hasher.combine(name) }

    public static func named(_ name: String) -> FleetMetric? { all.first { $0.name == name } }

    static func count(_ name: String, _ meaning: String, _ read: @escaping @Sendable (RunSummary) -> Int) -> FleetMetric {
        FleetMetric(name: name, unit: .count, meaning: meaning, read: { Double(read($0)) })
    }

    /// Every metric, in the order docs/fleet.md lists them.
    public static let all: [FleetMetric] =
        [
            count("composed", "counts.composed", { $0.counts.composed }),
            count("signed", "counts.signed", { $0.counts.signed }),
            count("synced", "counts.synced", { $0.counts.synced }),
            count("pending", "counts.pending: signed, not acknowledged at the end", { $0.counts.pending }),
            count("cancelled", "counts.cancelled", { $0.counts.cancelled }),
            count("declined", "counts.declined", { $0.counts.declined }),
            count("syncFailures", "counts.syncFailures", { $0.counts.syncFailures }),
            FleetMetric(name: "signedPerSecond", unit: .perSecond, meaning: "signedPerSecond", read: { $0.signedPerSecond }),
            FleetMetric(name: "syncedPerSecond", unit: .perSecond, meaning: "syncedPerSecond", read: { $0.syncedPerSecond }),
            FleetMetric(name: "syncAck.p50", unit: .seconds, meaning: "syncAck.p50", read: { $0.syncAck.p50 }),
            FleetMetric(name: "syncAck.p99", unit: .seconds, meaning: "syncAck.p99", read: { $0.syncAck.p99 }),
            FleetMetric(name: "syncAck.max", unit: .seconds, meaning: "syncAck.max", read: { $0.syncAck.max }),
            count("syncAck.samples", "syncAck.samples: syncs measured", { $0.syncAck.samples }),
            FleetMetric(name: "syncAckRun.p50", unit: .seconds, meaning: "syncAckRun.p50", read: { $0.syncAckRun?.p50 }),
            FleetMetric(name: "syncAckRun.p99", unit: .seconds, meaning: "syncAckRun.p99", read: { $0.syncAckRun?.p99 }),
            FleetMetric(name: "syncAckRun.max", unit: .seconds, meaning: "syncAckRun.max", read: { $0.syncAckRun?.max }),
            FleetMetric(name: "syncAckDrain.p50", unit: .seconds, meaning: "syncAckDrain.p50", read: { $0.syncAckDrain?.p50 }),
            FleetMetric(name: "syncAckDrain.p99", unit: .seconds, meaning: "syncAckDrain.p99", read: { $0.syncAckDrain?.p99 }),
            FleetMetric(name: "syncAckDrain.max", unit: .seconds, meaning: "syncAckDrain.max", read: { $0.syncAckDrain?.max }),
            count("anomalies", "anomalies: every kind", { $0.anomalies }),
        ]
        + CheckAnomaly.Kind.allCases.map { kind in
            count("\(kind)", "anomalyKinds[\"\(kind.rawValue)\"]", { $0.anomalyKinds[kind.rawValue] ?? 0 })
        }
        + [
            count("totalRestarts", "totalRestarts: unexpected exits restarted", { $0.totalRestarts }),
            count("faults", "faults: applied", { $0.faults.count }),
            count("drained", "drained: node processes", { $0.drained }),
            count("devices", "devices", { $0.devices }),
            count("nodeProcesses", "nodeProcesses", { $0.nodeProcesses }),
            FleetMetric(name: "durations.run", unit: .seconds, meaning: "durations.run", read: { $0.durations.run }),
            FleetMetric(name: "durations.drain", unit: .seconds, meaning: "durations.drain", read: { $0.durations.drain }),
            FleetMetric(name: "durations.total", unit: .seconds, meaning: "durations.total", read: { $0.durations.total }),
        ]

    /// `12`, `1.234 s` or `2.50/s`, for the printed lines and the report.
    public func format(_ value: Double?) -> String {
        guard let value else { return "no data" }
        switch unit {
        case .count: return value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : String(value)
        case .seconds: return value < 1 ? String(format: "%.1f ms", value * 1000) : String(format: "%.3f s", value)
        case .perSecond: return String(format: "%.2f/s", value)
        }
    }
}
