import Foundation
import Thresholds

// The grammar (splitting, comparisons, value syntax) is the shared Thresholds module's;
// this file gives `signfleet load`'s metric names their meaning.
public typealias ThresholdError = Thresholds.ThresholdError
public typealias ThresholdResult = Thresholds.ThresholdResult

/// A pass/fail criterion on the run's figures, such as `syncAck.p99 < 200ms`,
/// `errors.rate < 0.1%`, `throughput > 100/s` or `latency.p99.9 <= 1s abortOnFail`.
///
/// Grammar: `METRIC OP VALUE [abortOnFail]` with OP one of `<`, `<=`, `>`, `>=`, and METRIC:
/// - `latency.STAT` (from intended start: corrected for coordinated omission),
///   `uncorrected.STAT` (from actual start), or `STEP.STAT` for a ceremony step
///   (`compose`, `capture`, `signCommit`, `syncAck`); STAT is p50, p90, p99, p99.9, max, min,
///   mean or count; VALUE is a duration (`200ms`, `1.5s`, `800us`; a bare number is ms).
/// - `errors.rate`, `dropped.rate`: a fraction of finished ceremonies (errors) or of arrivals
///   (dropped); VALUE `0.1%` or `0.001`. `errors.count`, `dropped.count`: a number.
/// - `throughput`: successful ceremonies per second; VALUE `100/s` or `100`.
public struct Threshold: Sendable, Hashable, Codable, CustomStringConvertible {
    /// `<`, `<=`, `>`, `>=` (`ordering`).
    public typealias Comparison = ThresholdComparison

    public enum Metric: Sendable, Hashable, Codable {
        /// A latency histogram (`latency`, `uncorrected` or a step) and a statistic; milliseconds.
        case latency(histogram: String, statistic: String)
        case errorRate, errorCount, droppedRate, droppedCount
        /// Successful ceremonies per second.
        case throughput
    }

    /// The text as given.
    public var source: String
    public var metric: Metric
    public var comparison: Comparison
    /// In the metric's unit: milliseconds, a fraction, a count, or per second.
    public var limit: Double
    /// Stop the run as soon as this threshold fails (checked once a second).
    public var abortOnFail: Bool

    public var description: String { source }

    /// Parses a threshold; `steps` are the ceremony step names that may be named.
    public static func parse(_ text: String, steps: [String]) throws(ThresholdError) -> Threshold {
        let expression = try ThresholdExpression.parse(text, comparisons: ThresholdComparison.ordering, example: "syncAck.p99 < 200ms")
        let metric = try parseMetric(expression.metric, steps: steps, in: text)
        let limit = try parseValue(expression.value, for: metric, in: text)
        return Threshold(
            source: expression.source, metric: metric, comparison: expression.comparison, limit: limit, abortOnFail: expression.abortOnFail)
    }

    static func parseMetric(_ name: String, steps: [String], in text: String) throws(ThresholdError) -> Metric {
        switch name {
        case "errors.rate": return .errorRate
        case "errors.count": return .errorCount
        case "dropped.rate": return .droppedRate
        case "dropped.count": return .droppedCount
        case "throughput", "throughput.rate": return .throughput
        default: break
        }
        let histograms = ["latency", "uncorrected"] + steps
        guard let dot = name.firstIndex(of: "."), histograms.contains(String(name[..<dot])) else {
            throw ThresholdError(
                "threshold \"\(text)\": unknown metric \"\(name)\"; use errors.rate, errors.count, dropped.rate, dropped.count, "
                    + "throughput, or HISTOGRAM.STAT with HISTOGRAM one of \(histograms.joined(separator: ", "))")
        }
        let statistic = String(name[name.index(after: dot)...])
        guard LatencyStats.statistics.contains(statistic) || statistic == "p999" || statistic == "avg" || statistic == "median" else {
            throw ThresholdError(
                "threshold \"\(text)\": unknown statistic \"\(statistic)\"; use one of \(LatencyStats.statistics.joined(separator: ", "))")
        }
        return .latency(histogram: String(name[..<dot]), statistic: statistic)
    }

    static func parseValue(_ raw: String, for metric: Metric, in text: String) throws(ThresholdError) -> Double {
        switch metric {
        case .latency(_, let statistic) where statistic == "count": try ThresholdValue.count(raw, in: text)
        case .latency: try ThresholdValue.milliseconds(raw, in: text)
        case .errorRate, .droppedRate: try ThresholdValue.fraction(raw, in: text)
        case .errorCount, .droppedCount: try ThresholdValue.count(raw, in: text)
        case .throughput: try ThresholdValue.perSecond(raw, in: text)
        }
    }

    /// The metric's value in `figures`, or `nil` when it has none yet (no samples).
    public func actual(in figures: LoadFigures) -> Double? {
        switch metric {
        case .latency(let histogram, let statistic):
            guard let stats = figures.latency[histogram], stats.count > 0 || statistic == "count" else { return nil }
            return stats.value(of: statistic)
        case .errorRate:
            let finished = figures.completed + figures.errors
            return finished == 0 ? nil : Double(figures.errors) / Double(finished)
        case .errorCount: return Double(figures.errors)
        case .droppedRate: return figures.arrivals == 0 ? nil : Double(figures.dropped) / Double(figures.arrivals)
        case .droppedCount: return Double(figures.dropped)
        case .throughput: return figures.seconds > 0 ? Double(figures.completed) / figures.seconds : nil
        }
    }

    /// Checks the threshold; a metric without samples fails (nothing was shown to hold).
    public func evaluate(_ figures: LoadFigures) -> ThresholdResult {
        let actual = actual(in: figures)
        return ThresholdResult(threshold: source, actual: actual, passed: actual.map { comparison.holds($0, limit) } ?? false)
    }
}

/// The figures thresholds are checked against.
public struct LoadFigures: Sendable {
    public var arrivals: Int
    public var completed: Int
    public var errors: Int
    public var dropped: Int
    /// Seconds the throughput is measured over.
    public var seconds: Double
    /// `latency`, `uncorrected` and each step.
    public var latency: [String: LatencyStats]

    public init(arrivals: Int, completed: Int, errors: Int, dropped: Int, seconds: Double, latency: [String: LatencyStats]) {
        self.arrivals = arrivals
        self.completed = completed
        self.errors = errors
        self.dropped = dropped
        self.seconds = seconds
        self.latency = latency
    }

    public init(_ totals: LoadTotals, seconds: Double) {
        var latency = totals.steps.mapValues(LatencyStats.init)
        latency["latency"] = LatencyStats(totals.corrected)
        latency["uncorrected"] = LatencyStats(totals.uncorrected)
        self.init(
            arrivals: totals.arrivals, completed: totals.completed, errors: totals.errorCount, dropped: totals.dropped,
            seconds: seconds, latency: latency)
    }
}
