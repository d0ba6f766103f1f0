import Foundation
import Histogram

/// The result of a load run: what `summary.json` holds and the HTML report draws.
public struct LoadSummary: Sendable, Codable {
    public struct Interval: Sendable, Codable, Hashable {
        public var start: Double
        public var length: Double
        public var completed: Int
        public var errors: Int
        public var dropped: Int
        public var corrected: LatencyStats
        public var uncorrected: LatencyStats
    }

    /// One point of a percentile distribution: percentile (0–100) and latency in ms.
    public struct Point: Sendable, Codable, Hashable {
        public var percentile: Double
        public var milliseconds: Double
    }

    public var seed: UInt64
    public var profile: [String]
    public var process: String
    public var devices: Int
    public var maxOutstandingPerDevice: Int
    public var startedAt: Date
    /// Seconds from the start until the last ceremony ended (throughput is measured over it).
    public var seconds: Double
    public var arrivals: Int
    /// Arrivals per second the profile offered (arrivals / profile duration).
    public var offeredRate: Double
    public var completed: Int
    public var errors: [String: Int]
    public var errorCount: Int
    public var dropped: Int
    /// Ceremonies still running at the drain deadline (also counted in `errors` as `unfinished`).
    public var unfinished: Int
    /// Successful ceremonies per second.
    public var throughput: Double
    /// From each ceremony's intended start: corrected for coordinated omission.
    public var corrected: LatencyStats
    /// From when a device actually began the ceremony.
    public var uncorrected: LatencyStats
    /// How late the generator handed arrivals to their devices: its own lag on this machine. The
    /// corrected latencies include it; large values mean the generator's host could not keep up.
    public var dispatchLag: LatencyStats
    public var steps: [String: LatencyStats]
    public var stepOrder: [String]
    public var stages: [StageResult]
    public var intervals: [Interval]
    public var correctedDistribution: [Point]
    public var uncorrectedDistribution: [Point]
    public var thresholds: [ThresholdResult]
    /// Why the run stopped early (an `abortOnFail` threshold), if it did.
    public var abortedBy: String?
    /// The arrivals were stopped from outside (``LoadStop``: SIGINT/SIGTERM to `signfleet load`).
    public var interrupted = false
    /// The end-of-run integrity audit; absent when turned off (`--no-audit`) or the workload
    /// has nothing to audit.
    public var audit: LoadAudit?
    /// Every threshold passed, the run was neither aborted nor interrupted, and the audit (when run) passed.
    public var passed: Bool

    /// Adds the audit's verdict to the run's.
    mutating func attach(audit: LoadAudit) {
        self.audit = audit
        passed = passed && audit.passed
    }

    static func distribution(_ histogram: Histogram<UInt64>) -> [Point] {
        guard histogram.totalCount > 0 else { return [] }
        var points: [Point] = []
        for value in histogram.percentiles(ticksPerHalfDistance: 5) {
            points.append(Point(percentile: value.percentileLevelIteratedTo, milliseconds: Double(value.value) / 1000))
            if value.percentileLevelIteratedTo >= 100 { break }
        }
        return points
    }

    public func jsonData() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.dateEncodingStrategy = .iso8601
        return try encoder.encode(self)
    }

    /// A short human-readable account, for the end of the command's output.
    public var text: String {
        func row(_ name: String, _ s: LatencyStats) -> String {
            "  " + name.padding(toLength: 12, withPad: " ", startingAt: 0)
                + String(format: "p50 %8.2f  p90 %8.2f  p99 %8.2f  p99.9 %8.2f  max %8.2f ms  (n=%llu)", s.p50, s.p90, s.p99, s.p999, s.max, s.count)
        }
        var lines = [
            "seed \(seed)  profile \(profile.joined(separator: " "))  \(process) arrivals  \(devices) devices (≤\(maxOutstandingPerDevice) outstanding each)",
            String(format: "arrivals %d (offered %.1f/s)  completed %d  throughput %.1f/s  errors %d  dropped %d  unfinished %d  in %.1fs",
                   arrivals, offeredRate, completed, throughput, errorCount, dropped, unfinished, seconds),
            "latency (ms):",
            row("corrected", corrected),
            row("uncorrected", uncorrected),
        ]
        for step in stepOrder { if let stats = steps[step] { lines.append(row(step, stats)) } }
        lines.append(row("dispatchLag", dispatchLag) + "  (the generator's own lag)")
        if !errors.isEmpty {
            lines.append("errors: " + errors.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " "))
        }
        for result in thresholds {
            let actual = result.actual.map { String(format: "%.4g", $0) } ?? "no data"
            lines.append("threshold \(result.passed ? "PASS" : "FAIL")  \(result.threshold)  (actual \(actual))")
        }
        if let abortedBy { lines.append("aborted early: \(abortedBy)") }
        if interrupted { lines.append("interrupted (SIGINT/SIGTERM): arrivals stopped early") }
        if let audit { lines += audit.lines }
        return lines.joined(separator: "\n")
    }
}
