import Histogram

/// Percentiles of a latency histogram, in milliseconds (recorded in microseconds).
public struct LatencyStats: Sendable, Hashable, Codable {
    public var count: UInt64
    public var min: Double
    public var mean: Double
    public var p50: Double
    public var p90: Double
    public var p99: Double
    public var p999: Double
    public var max: Double

    public init(_ histogram: Histogram<UInt64>) {
        count = histogram.totalCount
        guard count > 0 else {
            (min, mean, p50, p90, p99, p999, max) = (0, 0, 0, 0, 0, 0, 0)
            return
        }
        func ms(_ value: UInt64) -> Double { Double(value) / 1000 }
        min = ms(histogram.min)
        mean = histogram.mean / 1000
        p50 = ms(histogram.valueAtPercentile(50))
        p90 = ms(histogram.valueAtPercentile(90))
        p99 = ms(histogram.valueAtPercentile(99))
        p999 = ms(histogram.valueAtPercentile(99.9))
        max = ms(histogram.max)
    }

    /// A statistic by the name thresholds use (`p50`, `p90`, `p99`, `p99.9`, `p999`, `max`, `min`, `mean`, `avg`, `count`).
    public func value(of statistic: String) -> Double? {
        switch statistic {
        case "p50", "median": p50
        case "p90": p90
        case "p99": p99
        case "p99.9", "p999": p999
        case "max": max
        case "min": min
        case "mean", "avg": mean
        case "count": Double(count)
        default: nil
        }
    }

    public static let statistics = ["p50", "p90", "p99", "p99.9", "max", "min", "mean", "count"]
}

/// Histograms in microseconds, auto-resizing, three significant digits.
func makeLatencyHistogram() -> Histogram<UInt64> {
    Histogram<UInt64>(numberOfSignificantValueDigits: .three)
}
