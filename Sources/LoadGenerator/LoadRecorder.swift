import Histogram
import Synchronization

/// What one profile stage saw.
public struct StageResult: Sendable, Hashable, Codable {
    public var stage: String
    public var arrivals: Int
    public var completed: Int
    public var errors: Int
    public var dropped: Int
    /// From each ceremony's intended start (corrected for coordinated omission).
    public var corrected: LatencyStats
    /// From each ceremony's actual start.
    public var uncorrected: LatencyStats
}

/// One closed time interval (by completion time), for plots and the interval log.
public struct IntervalResult: Sendable, Hashable, Codable {
    /// Seconds from the run's start.
    public var start: Double
    public var length: Double
    public var completed: Int
    public var errors: Int
    public var dropped: Int
    public var corrected: LatencyStats
    public var uncorrected: LatencyStats
    public var correctedLog: EncodedInterval
    public var uncorrectedLog: EncodedInterval
}

/// Everything recorded so far.
public struct LoadTotals: Sendable {
    public var arrivals = 0
    public var completed = 0
    public var dropped = 0
    public var errors: [String: Int] = [:]
    public var corrected = makeLatencyHistogram()
    public var uncorrected = makeLatencyHistogram()
    public var steps: [String: Histogram<UInt64>] = [:]
    /// How late the generator itself handed arrivals to their devices (its own lag).
    public var dispatchLag = makeLatencyHistogram()
    public var errorCount: Int { errors.values.reduce(0, +) }
}

/// Records each ceremony's latency twice — from its intended start (corrected) and from when a
/// device actually began it (uncorrected) — in HdrHistograms: overall, per profile stage, per
/// ceremony step, and per time interval (closed as time passes and encoded for the `.hlog`).
/// Thread-safe; the runner's tasks record concurrently.
public final class LoadRecorder: Sendable {
    public let stepNames: [String]
    public let stageNames: [String]
    public let intervalLength: Double

    private struct StageState {
        var arrivals = 0, completed = 0, errors = 0, dropped = 0
        var corrected = makeLatencyHistogram()
        var uncorrected = makeLatencyHistogram()
    }

    private struct IntervalState {
        var index = 0
        var completed = 0, errors = 0, dropped = 0
        var corrected = makeLatencyHistogram()
        var uncorrected = makeLatencyHistogram()
    }

    private struct State {
        var totals = LoadTotals()
        var stages: [StageState]
        var current = IntervalState()
        var closed: [IntervalResult] = []
        var encodingFailure: String?
    }

    private let state: Mutex<State>

    public init(steps: [String], stages: [String], intervalLength: Double = 1) {
        stepNames = steps
        stageNames = stages
        self.intervalLength = max(0.001, intervalLength)
        var initial = State(stages: Array(repeating: StageState(), count: stages.count))
        for step in steps { initial.totals.steps[step] = makeLatencyHistogram() }
        state = Mutex(initial)
    }

    /// An arrival handed to the devices `lag` after its intended time.
    public func recordArrival(stage: Int, lag: Duration = .zero) {
        state.withLock {
            $0.totals.dispatchLag.record(lag.microseconds)
            $0.totals.arrivals += 1
            $0.stages[stage].arrivals += 1
        }
    }

    /// An arrival the generator could not start (the device already had its limit outstanding).
    public func recordDrop(stage: Int, at elapsed: Duration) {
        state.withLock {
            roll(&$0, to: elapsed)
            $0.totals.dropped += 1
            $0.stages[stage].dropped += 1
            $0.current.dropped += 1
        }
    }

    public func recordSuccess(stage: Int, intended: Duration, started: Duration, finished: Duration, steps: [StepTiming]) {
        let corrected = (finished - intended).microseconds
        let uncorrected = (finished - started).microseconds
        state.withLock {
            roll(&$0, to: finished)
            $0.totals.completed += 1
            $0.totals.corrected.record(corrected)
            $0.totals.uncorrected.record(uncorrected)
            for timing in steps { $0.totals.steps[timing.step, default: makeLatencyHistogram()].record(timing.duration.microseconds) }
            $0.stages[stage].completed += 1
            $0.stages[stage].corrected.record(corrected)
            $0.stages[stage].uncorrected.record(uncorrected)
            $0.current.completed += 1
            $0.current.corrected.record(corrected)
            $0.current.uncorrected.record(uncorrected)
        }
    }

    public func recordFailure(stage: Int, kind: String, at elapsed: Duration) {
        state.withLock {
            roll(&$0, to: elapsed)
            $0.totals.errors[kind, default: 0] += 1
            $0.stages[stage].errors += 1
            $0.current.errors += 1
        }
    }

    /// Closes the intervals that ended before `elapsed`.
    public func advance(to elapsed: Duration) {
        state.withLock { roll(&$0, to: elapsed) }
    }

    /// Closes the interval in progress (at the end of the run).
    public func finish(at elapsed: Duration) {
        state.withLock {
            roll(&$0, to: elapsed)
            let length = elapsed.seconds - Double($0.current.index) * intervalLength
            let current = $0.current
            // A run ending on an interval boundary leaves an empty, zero-length interval: skip it.
            if length > 0.000_001 || current.completed + current.errors + current.dropped > 0 {
                close(&$0, length: max(length, 0.000_001))
            }
        }
    }

    public var totals: LoadTotals { state.withLock { $0.totals } }
    public var intervals: [IntervalResult] { state.withLock { $0.closed } }
    /// Set when an interval could not be encoded for the log (zlib failure).
    public var encodingFailure: String? { state.withLock { $0.encodingFailure } }

    public var stages: [StageResult] {
        state.withLock { state in
            state.stages.enumerated().map { index, stage in
                StageResult(
                    stage: stageNames[index], arrivals: stage.arrivals, completed: stage.completed, errors: stage.errors,
                    dropped: stage.dropped, corrected: LatencyStats(stage.corrected), uncorrected: LatencyStats(stage.uncorrected))
            }
        }
    }

    private func roll(_ state: inout State, to elapsed: Duration) {
        let index = Int(max(0, elapsed.seconds) / intervalLength)
        while state.current.index < index {
            close(&state, length: intervalLength)
        }
    }

    private func close(_ state: inout State, length: Double) {
        let current = state.current
        do {
            state.closed.append(
                IntervalResult(
                    start: Double(current.index) * intervalLength, length: length, completed: current.completed,
                    errors: current.errors, dropped: current.dropped, corrected: LatencyStats(current.corrected),
                    uncorrected: LatencyStats(current.uncorrected), correctedLog: try EncodedInterval(current.corrected),
                    uncorrectedLog: try EncodedInterval(current.uncorrected)))
        } catch {
            state.encodingFailure = error.description
        }
        state.current = IntervalState(index: current.index + 1)
    }
}
