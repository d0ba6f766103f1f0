import Foundation

/// One measured figure, printed as a JSON line so `loadtests/run` can gather
/// figures from Swift and from the reference programs alike.
struct Figure: Encodable {
    var bench: String
    var metric: String
    var value: Double
    var unit: String
}

enum Report {
    static func emit(_ bench: String, _ metric: String, _ value: Double, _ unit: String) {
        let figure = Figure(bench: bench, metric: metric, value: value, unit: unit)
        let data = try! JSONEncoder().encode(figure)
        print(String(decoding: data, as: UTF8.self))
    }
}

/// Runs `body` repeatedly for at least `seconds` (after a short warm-up) and
/// returns operations per second, where each call of `body` performs `opsPerCall` operations.
func measureRate(seconds: Double = 2.0, opsPerCall: Int = 1, _ body: () throws -> Void) rethrows -> Double {
    let clock = ContinuousClock()
    let warmUpEnd = clock.now.advanced(by: .milliseconds(200))
    while clock.now < warmUpEnd { try body() }
    var calls = 0
    let start = clock.now
    let end = start.advanced(by: .milliseconds(Int64(seconds * 1000)))
    while clock.now < end {
        for _ in 0..<16 { try body() }
        calls += 16
    }
    let elapsed = start.duration(to: clock.now)
    let secondsElapsed = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    return Double(calls * opsPerCall) / secondsElapsed
}

/// Keeps the optimiser from deleting benchmark work.
@inline(never) func blackHole<T>(_ value: T) { _ = value }

/// A benchmark's bad option or failed precondition, printed by `main` as the reason it stopped.
struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A benchmark's numeric options (`--name value`), checked: a value that is not a number of the
/// range is an error that names the option, never a trap.
struct BenchOptions {
    let arguments: [String]

    func number(_ name: String, default value: Double, range: ClosedRange<Double>) throws -> Double {
        guard let i = arguments.firstIndex(of: name) else { return value }
        guard i + 1 < arguments.count, let given = Double(arguments[i + 1]), range.contains(given) else {
            throw BenchError("\(name) takes a number from \(range.lowerBound) to \(range.upperBound)")
        }
        return given
    }

    func integer(_ name: String, default value: Int, range: ClosedRange<Int>) throws -> Int {
        guard let i = arguments.firstIndex(of: name) else { return value }
        guard i + 1 < arguments.count, let given = Int(arguments[i + 1]), range.contains(given) else {
            throw BenchError("\(name) takes a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return given
    }
}

