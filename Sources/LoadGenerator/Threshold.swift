import Foundation

/// A bad threshold, with what was wrong and what is accepted.
public struct ThresholdError: Error, Hashable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

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
    public enum Comparison: String, Sendable, Hashable, Codable, CaseIterable {
        case less = "<", lessOrEqual = "<=", greater = ">", greaterOrEqual = ">="

        func holds(_ actual: Double, _ limit: Double) -> Bool {
            switch self {
            case .less: actual < limit
            case .lessOrEqual: actual <= limit
            case .greater: actual > limit
            case .greaterOrEqual: actual >= limit
            }
        }
    }

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
        let source = text.trimmingCharacters(in: .whitespaces)
        guard let start = source.firstIndex(where: { $0 == "<" || $0 == ">" }) else {
            throw ThresholdError("threshold \"\(text)\" has no comparison; write METRIC OP VALUE, e.g. \"syncAck.p99 < 200ms\" (OP: <, <=, >, >=)")
        }
        var end = source.index(after: start)
        if end < source.endIndex, source[end] == "=" { end = source.index(after: end) }
        guard let comparison = Comparison(rawValue: String(source[start..<end])) else {
            throw ThresholdError("threshold \"\(text)\": unknown comparison")
        }
        let range = start..<end
        let name = source[..<range.lowerBound].trimmingCharacters(in: .whitespaces)
        var words = source[range.upperBound...].split(separator: " ").map(String.init)
        var abortOnFail = false
        if words.last == "abortOnFail" {
            abortOnFail = true
            words.removeLast()
        }
        guard words.count == 1, let valueText = words.first else {
            throw ThresholdError("threshold \"\(text)\": expected one value after \"\(comparison.rawValue)\" (optionally followed by abortOnFail)")
        }
        let metric = try parseMetric(name, steps: steps, in: text)
        let limit = try parseValue(valueText, for: metric, in: text)
        return Threshold(source: source, metric: metric, comparison: comparison, limit: limit, abortOnFail: abortOnFail)
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
        func number(_ digits: Substring, _ expected: String) throws(ThresholdError) -> Double {
            guard let value = Double(digits), value.isFinite, value >= 0 else {
                throw ThresholdError("threshold \"\(text)\": \"\(raw)\" is not \(expected)")
            }
            return value
        }
        switch metric {
        case .latency(_, let statistic) where statistic == "count":
            return try number(Substring(raw), "a count")
        case .latency:
            for (suffix, scale) in [("ms", 1.0), ("us", 0.001), ("µs", 0.001), ("s", 1000.0)] where raw.hasSuffix(suffix) {
                return try number(raw.dropLast(suffix.count), "a duration (e.g. 200ms, 1.5s)") * scale
            }
            return try number(Substring(raw), "a duration (e.g. 200ms, 1.5s)")
        case .errorRate, .droppedRate:
            if raw.hasSuffix("%") { return try number(raw.dropLast(), "a percentage (e.g. 0.1%)") / 100 }
            let value = try number(Substring(raw), "a rate (e.g. 0.1% or 0.001)")
            guard value <= 1 else { throw ThresholdError("threshold \"\(text)\": a rate of \(raw) is more than 1; write a percentage as \(raw)%") }
            return value
        case .errorCount, .droppedCount:
            return try number(Substring(raw), "a count")
        case .throughput:
            return try number(raw.hasSuffix("/s") ? raw.dropLast(2) : Substring(raw), "a rate per second (e.g. 100/s)")
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

/// A threshold's verdict.
public struct ThresholdResult: Sendable, Hashable, Codable {
    public var threshold: String
    /// `nil` when the metric had no samples.
    public var actual: Double?
    public var passed: Bool
}
