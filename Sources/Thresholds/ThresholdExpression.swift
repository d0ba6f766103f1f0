import Foundation

/// The grammar shared by `signfleet load --threshold` and a fleet scenario's
/// `checks.thresholds`: `METRIC OP VALUE [abortOnFail]`. Each user gives the metric
/// names their meaning and picks the value's kind (``ThresholdValue``); the
/// splitting, the comparisons and the value syntax live here once.

/// A bad threshold, with what was wrong and what is accepted.
public struct ThresholdError: Error, Hashable, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// How a threshold compares the observed value with its limit.
public enum ThresholdComparison: String, Sendable, Hashable, Codable, CaseIterable {
    case less = "<", lessOrEqual = "<=", greater = ">", greaterOrEqual = ">="
    case equal = "==", notEqual = "!="

    /// `<`, `<=`, `>`, `>=`: what `signfleet load` accepts.
    public static let ordering: [ThresholdComparison] = [.less, .lessOrEqual, .greater, .greaterOrEqual]

    public func holds(_ actual: Double, _ limit: Double) -> Bool {
        switch self {
        case .less: actual < limit
        case .lessOrEqual: actual <= limit
        case .greater: actual > limit
        case .greaterOrEqual: actual >= limit
        case .equal: actual == limit
        case .notEqual: actual != limit
        }
    }
}

/// A threshold split into its parts; the metric name and the value are still text.
public struct ThresholdExpression: Sendable, Hashable {
    /// The text as given, trimmed.
    public var source: String
    public var metric: String
    public var comparison: ThresholdComparison
    public var value: String
    /// The text ended in `abortOnFail`.
    public var abortOnFail: Bool

    /// Splits `text` at its first comparison (one of `comparisons`).
    /// - Parameters:
    ///   - text: one threshold, `METRIC OP VALUE`.
    ///   - comparisons: the comparisons the caller accepts.
    ///   - example: shown when there is no comparison, e.g. `syncAck.p99 < 200ms`.
    public static func parse(_ text: String, comparisons: [ThresholdComparison], example: String) throws(ThresholdError)
        -> ThresholdExpression
    {
        let source = text.trimmingCharacters(in: .whitespaces)
        let starts = Set(comparisons.compactMap { $0.rawValue.first })
        let operators = "(OP: \(comparisons.map(\.rawValue).joined(separator: ", ")))"
        guard let start = source.firstIndex(where: { starts.contains($0) }) else {
            throw ThresholdError("threshold \"\(text)\" has no comparison; write METRIC OP VALUE, e.g. \"\(example)\" \(operators)")
        }
        // The longest comparison that starts there (`<=` before `<`).
        let rest = source[start...]
        guard let comparison = comparisons.sorted(by: { $0.rawValue.count > $1.rawValue.count }).first(where: { rest.hasPrefix($0.rawValue) })
        else {
            throw ThresholdError("threshold \"\(text)\": unknown comparison \(operators)")
        }
        let end = source.index(start, offsetBy: comparison.rawValue.count)
        let metric = source[..<start].trimmingCharacters(in: .whitespaces)
        var words = source[end...].split(separator: " ").map(String.init)
        var abortOnFail = false
        if words.last == "abortOnFail" {
            abortOnFail = true
            words.removeLast()
        }
        guard words.count == 1, let value = words.first else {
            throw ThresholdError(
                "threshold \"\(text)\": expected one value after \"\(comparison.rawValue)\" (optionally followed by abortOnFail)")
        }
        return ThresholdExpression(source: source, metric: metric, comparison: comparison, value: value, abortOnFail: abortOnFail)
    }
}

/// The value syntaxes: each parses `raw` into the metric's unit or says what was expected.
public enum ThresholdValue {
    static func number(_ digits: Substring, raw: String, text: String, expected: String) throws(ThresholdError) -> Double {
        guard let value = Double(digits), value.isFinite, value >= 0 else {
            throw ThresholdError("threshold \"\(text)\": \"\(raw)\" is not \(expected)")
        }
        return value
    }

    /// `200ms`, `1.5s`, `800us` (or `µs`); a bare number is milliseconds. In milliseconds.
    public static func milliseconds(_ raw: String, in text: String) throws(ThresholdError) -> Double {
        let expected = "a duration (e.g. 200ms, 1.5s)"
        for (suffix, scale) in [("ms", 1.0), ("us", 0.001), ("µs", 0.001), ("s", 1000.0)] where raw.hasSuffix(suffix) {
            return try number(raw.dropLast(suffix.count), raw: raw, text: text, expected: expected) * scale
        }
        return try number(Substring(raw), raw: raw, text: text, expected: expected)
    }

    /// `0.1%` or a fraction `0.001` (at most 1).
    public static func fraction(_ raw: String, in text: String) throws(ThresholdError) -> Double {
        if raw.hasSuffix("%") { return try number(raw.dropLast(), raw: raw, text: text, expected: "a percentage (e.g. 0.1%)") / 100 }
        let value = try number(Substring(raw), raw: raw, text: text, expected: "a rate (e.g. 0.1% or 0.001)")
        guard value <= 1 else { throw ThresholdError("threshold \"\(text)\": a rate of \(raw) is more than 1; write a percentage as \(raw)%") }
        return value
    }

    /// A plain number of things.
    public static func count(_ raw: String, in text: String) throws(ThresholdError) -> Double {
        try number(Substring(raw), raw: raw, text: text, expected: "a count")
    }

    /// `100/s` or `100`.
    public static func perSecond(_ raw: String, in text: String) throws(ThresholdError) -> Double {
        try number(raw.hasSuffix("/s") ? raw.dropLast(2) : Substring(raw), raw: raw, text: text, expected: "a rate per second (e.g. 100/s)")
    }
}

/// A threshold's verdict.
public struct ThresholdResult: Sendable, Hashable, Codable {
    /// The threshold as written.
    public var threshold: String
    /// The observed value in the metric's unit; `nil` when the metric had no samples.
    public var actual: Double?
    public var passed: Bool

    public init(threshold: String, actual: Double?, passed: Bool) {
        self.threshold = threshold
        self.actual = actual
        self.passed = passed
    }
}
