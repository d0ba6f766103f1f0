import Foundation

/// One segment of a load profile: the arrival rate goes linearly from `fromRate` to `toRate`
/// (arrivals per second) over `duration`. Equal rates make a plateau.
public struct LoadStage: Sendable, Hashable, Codable, CustomStringConvertible {
    public var duration: Duration
    public var fromRate: Double
    public var toRate: Double

    public init(duration: Duration, fromRate: Double, toRate: Double) {
        self.duration = duration
        self.fromRate = fromRate
        self.toRate = toRate
    }

    public init(duration: Duration, rate: Double) {
        self.init(duration: duration, fromRate: rate, toRate: rate)
    }

    public var seconds: Double { duration.seconds }

    /// Arrivals expected in the first `t` seconds of the stage (the integral of the rate).
    public func expectedArrivals(within t: Double) -> Double {
        let t = min(max(0, t), seconds)
        guard seconds > 0 else { return 0 }
        return fromRate * t + (toRate - fromRate) * t * t / (2 * seconds)
    }

    /// Inverse of ``expectedArrivals(within:)``: the time (seconds into the stage) by which
    /// `count` arrivals are expected. `count` must not exceed the stage's total.
    public func time(forExpectedArrivals count: Double) -> Double {
        let slope = (toRate - fromRate) / seconds
        if abs(slope) < 1e-12 { return fromRate > 0 ? count / fromRate : seconds }
        // slope/2 t² + fromRate t − count = 0, the root inside the stage.
        let discriminant = max(0, fromRate * fromRate + 2 * slope * count)
        return min(seconds, max(0, (discriminant.squareRoot() - fromRate) / slope))
    }

    public var description: String {
        let d = LoadProfile.format(duration)
        return fromRate == toRate ? "\(d):\(LoadProfile.format(rate: fromRate))" : "\(d):\(LoadProfile.format(rate: fromRate))-\(LoadProfile.format(rate: toRate))"
    }
}

/// How arrivals are spaced at a given rate.
public enum ArrivalProcess: String, Sendable, Codable, CaseIterable {
    /// A Poisson process (exponential gaps, seeded): bursts and lulls as from independent users.
    case poisson
    /// Evenly spaced arrivals (as wrk2 does).
    case uniform
}

/// A bad load-profile option, with what was wrong.
public struct LoadProfileError: Error, Hashable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// The load to offer: stages run one after the other.
public struct LoadProfile: Sendable, Hashable, Codable {
    public var stages: [LoadStage]

    public init(stages: [LoadStage]) throws(LoadProfileError) {
        guard !stages.isEmpty else { throw LoadProfileError("a load profile needs at least one stage") }
        for (index, stage) in stages.enumerated() {
            guard stage.duration > .zero else { throw LoadProfileError("stage \(index + 1) (\(stage)) has no duration") }
            guard stage.fromRate >= 0, stage.toRate >= 0, stage.fromRate.isFinite, stage.toRate.isFinite else {
                throw LoadProfileError("stage \(index + 1) (\(stage)) has a negative or infinite rate")
            }
        }
        self.stages = stages
    }

    /// A constant rate for a duration (`--rate 200 --duration 30s`).
    public static func constant(rate: Double, duration: Duration) throws(LoadProfileError) -> LoadProfile {
        guard rate > 0, rate.isFinite else { throw LoadProfileError("--rate must be a positive number of arrivals per second, not \(rate)") }
        return try LoadProfile(stages: [LoadStage(duration: duration, rate: rate)])
    }

    /// Parses stage specs such as `10s:0-500` (ramp from 0 to 500/s over 10 s) and `20s:500` (plateau).
    public static func parse(stages specs: [String]) throws(LoadProfileError) -> LoadProfile {
        try LoadProfile(stages: specs.map { spec throws(LoadProfileError) in try parseStage(spec) })
    }

    public static func parseStage(_ spec: String) throws(LoadProfileError) -> LoadStage {
        let parts = spec.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2 else {
            throw LoadProfileError("stage \"\(spec)\" is not DURATION:RATE or DURATION:FROM-TO (e.g. 20s:500 or 10s:0-500)")
        }
        let duration = try parseDuration(String(parts[0]))
        let rates = parts[1].split(separator: "-", omittingEmptySubsequences: false)
        guard (1...2).contains(rates.count) else {
            throw LoadProfileError("stage \"\(spec)\": the rate \"\(parts[1])\" is not RATE or FROM-TO")
        }
        var values: [Double] = []
        for text in rates {
            let trimmed = text.hasSuffix("/s") ? String(text.dropLast(2)) : String(text)
            guard let value = Double(trimmed), value >= 0, value.isFinite else {
                throw LoadProfileError("stage \"\(spec)\": \"\(text)\" is not a rate (arrivals per second, ≥ 0)")
            }
            values.append(value)
        }
        return LoadStage(duration: duration, fromRate: values[0], toRate: values.last ?? values[0])
    }

    /// Parses `250ms`, `30s`, `2m`, `1h` (a bare number is seconds).
    public static func parseDuration(_ text: String) throws(LoadProfileError) -> Duration {
        let units: [(String, Double)] = [("ms", 0.001), ("us", 0.000_001), ("s", 1), ("m", 60), ("h", 3600)]
        var number = Substring(text)
        var scale = 1.0
        for (suffix, factor) in units where text.hasSuffix(suffix) {
            number = text.dropLast(suffix.count)
            scale = factor
            break
        }
        guard let value = Double(number), value.isFinite, value > 0 else {
            throw LoadProfileError("\"\(text)\" is not a duration (e.g. 500ms, 30s, 2m)")
        }
        // Checked before converting: "1e300s" used to trap the CLI instead of being refused.
        let nanoseconds = (value * scale * 1e9).rounded()
        guard nanoseconds < 9.2e18 else {
            throw LoadProfileError("\"\(text)\" is too long a duration (at most about 292 years)")
        }
        return .nanoseconds(Int64(nanoseconds))
    }

    public var duration: Duration { stages.reduce(.zero) { $0 + $1.duration } }

    /// Arrivals the profile offers on average.
    public var expectedArrivals: Double { stages.reduce(0) { $0 + $1.expectedArrivals(within: $1.seconds) } }

    public var description: String { stages.map(\.description).joined(separator: " ") }

    static func format(_ duration: Duration) -> String {
        let seconds = duration.seconds
        return seconds >= 1 && seconds == seconds.rounded() ? "\(Int64(seconds))s" : "\(Int64((seconds * 1000).rounded()))ms"
    }

    static func format(rate: Double) -> String {
        rate == rate.rounded() && abs(rate) < 1e15 ? "\(Int64(rate))" : String(format: rate < 1e15 ? "%.2f" : "%g", rate)
    }
}

extension Duration {
    /// The duration in whole microseconds (≥ 0), the histograms' unit.
    var microseconds: UInt64 {
        let value = Double(components.seconds) * 1e6 + Double(components.attoseconds) / 1e12
        return value <= 0 ? 0 : UInt64(min(value.rounded(), 1e18))
    }
}
