import FleetProtocol
import Foundation
import Logging
import Synchronization

/// Runs a load profile open-loop against a workload.
///
/// A scheduler task walks the ``ArrivalSchedule`` and hands each arrival, at its intended time,
/// to its device's queue — whether or not earlier ceremonies have finished (open loop). Each
/// device performs its ceremonies one at a time, so when the system under test slows down,
/// ceremonies wait in the queues and the wait counts in their *corrected* latency (measured from
/// the intended start), while the *uncorrected* latency (from the moment the device began) shows
/// what a closed-loop tool would have reported. A device with `maxOutstandingPerDevice` already
/// outstanding drops the arrival, and drops are reported.
public struct LoadRunner: Sendable {
    public let configuration: LoadConfiguration
    public let workload: any LoadWorkload
    let logger: Logger
    /// What the arrival schedule, the drain deadline, the progress ticks and the latencies are
    /// timed on (a test's `ManualClock` moves only when the test says).
    let clock: any FleetClock
    /// What the report's start time is read from.
    let wall: WallClock

    public init(
        configuration: LoadConfiguration, workload: any LoadWorkload, logger: Logger = Logger(label: "signfleet.load"),
        clock: any FleetClock = ContinuousClock(), wall: WallClock = .system
    ) {
        self.clock = clock
        self.wall = wall
        self.configuration = configuration
        self.workload = workload
        self.logger = logger
    }

    /// Sets up the devices, runs the profile, drains, audits (unless turned off), closes the
    /// devices and returns the summary (thresholds and audit evaluated). `progress` is called
    /// once per interval. `stop` ends the arrivals early (the run then drains, audits and reports,
    /// marked ``LoadSummary/interrupted``).
    ///
    /// Cancelling the calling task ends the run at once instead: the arrivals stop, the ceremonies
    /// in flight are cancelled, the devices close and `run` throws `CancellationError` (no audit,
    /// no summary).
    public func run(progress: (@Sendable (LoadProgress) -> Void)? = nil, stop: LoadStop = LoadStop()) async throws -> LoadRun {
        let devices = try await makeDevices()
        var result = await measure(devices: devices, progress: progress, stop: stop)
        // After the run's clock stopped: the audit's time is in no latency and no throughput.
        if configuration.audit, !Task.isCancelled,
            let audit = await audit(devices: devices, failedCeremonies: result.summary.errorCount)
        {
            result.summary.attach(audit: audit)
        }
        for device in devices { await device.close() }
        try Task.checkCancellation()
        return result
    }

    /// Devices audited at once (each reads its store and pages through `sync.results`).
    static let auditConcurrency = 8

    /// Compares every device's outbox with the coordinator's records (``SyncAudit``); `nil`
    /// when the workload's devices have nothing to audit.
    private func audit(devices: [any LoadDevice], failedCeremonies: Int) async -> LoadAudit? {
        let start = clock.now
        var results: [(Int, DeviceAuditResult)] = []
        var errors: [(Int, LoadAudit.DeviceError)] = []
        var audited = 0
        await withTaskGroup(of: (Int, Result<DeviceAuditInput?, any Error>).self) { group in
            var next = 0
            func startNext() {
                guard next < devices.count else { return }
                let index = next
                let device = devices[index]
                next += 1
                group.addTask {
                    do { return (index, .success(try await device.auditInput())) } catch { return (index, .failure(error)) }
                }
            }
            for _ in 0..<Self.auditConcurrency { startNext() }
            for await (index, outcome) in group {
                switch outcome {
                case .success(let input?):
                    audited += 1
                    results.append((index, SyncAudit.classify(input)))
                case .success(nil):
                    break
                case .failure(let error):
                    audited += 1
                    errors.append((index, LoadAudit.DeviceError(device: "device \(index)", error: "\(error)")))
                }
                startNext()
            }
        }
        guard audited > 0 else { return nil }
        let audit = LoadAudit(
            results: results.sorted { $0.0 < $1.0 }.map(\.1), errors: errors.sorted { $0.0 < $1.0 }.map(\.1),
            failedCeremonies: failedCeremonies, seconds: (clock.now - start).seconds)
        if !audit.passed {
            logger.warning("integrity audit failed", metadata: ["counts": "\(audit.counts)", "errors": "\(audit.errors.count)"])
        }
        return audit
    }

    private func makeDevices() async throws -> [any LoadDevice] {
        try await withThrowingTaskGroup(of: (Int, any LoadDevice).self) { group in
            for index in 0..<configuration.devices {
                let seed = configuration.seed &+ UInt64(index) &* 0x9E37_79B9
                group.addTask { (index, try await workload.makeDevice(index: index, seed: seed)) }
            }
            var devices: [(Int, any LoadDevice)] = []
            do {
                for try await device in group { devices.append(device) }
            } catch {
                for (_, device) in devices { await device.close() }
                throw error
            }
            return devices.sorted { $0.0 < $1.0 }.map(\.1)
        }
    }

    private func measure(devices: [any LoadDevice], progress: (@Sendable (LoadProgress) -> Void)?, stop: LoadStop) async -> LoadRun {
        let configuration = configuration
        let stageNames = configuration.profile.stages.map(\.description)
        let recorder = LoadRecorder(steps: workload.steps, stages: stageNames, intervalLength: configuration.interval.seconds)
        let admission = Admission(devices: devices.count, limit: configuration.maxOutstandingPerDevice)
        let startedAt = wall.now()
        let start = clock.now
        let openLoop = OpenLoop(
            configuration: configuration, devices: devices, recorder: recorder, admission: admission, start: start,
            progress: progress, logger: logger, clock: clock)
        await openLoop.run(stop: stop)
        let end = clock.now - start
        for arrival in admission.unfinished {
            recorder.recordFailure(stage: arrival.stage, kind: "unfinished", at: end)
        }
        recorder.finish(at: end)
        var summary = summarize(
            recorder: recorder, startedAt: startedAt, end: end, unfinished: admission.unfinished.count, abortedBy: openLoop.abort.value)
        if stop.isStopped {
            summary.interrupted = true
            summary.passed = false
        }
        return LoadRun(summary: summary, recorder: recorder)
    }

    private func summarize(recorder: LoadRecorder, startedAt: Date, end: Duration, unfinished: Int, abortedBy: String?) -> LoadSummary {
        let totals = recorder.totals
        let seconds = max(end.seconds, 0.001)
        let figures = LoadFigures(totals, seconds: seconds)
        let results = configuration.thresholds.map { $0.evaluate(figures) }
        return LoadSummary(
            seed: configuration.seed, profile: configuration.profile.stages.map(\.description),
            process: configuration.process.rawValue, devices: configuration.devices,
            maxOutstandingPerDevice: configuration.maxOutstandingPerDevice, startedAt: startedAt, seconds: seconds,
            arrivals: totals.arrivals, offeredRate: Double(totals.arrivals) / max(configuration.profile.duration.seconds, 0.001),
            completed: totals.completed, errors: totals.errors, errorCount: totals.errorCount, dropped: totals.dropped,
            unfinished: unfinished, throughput: Double(totals.completed) / seconds,
            corrected: LatencyStats(totals.corrected), uncorrected: LatencyStats(totals.uncorrected),
            dispatchLag: LatencyStats(totals.dispatchLag),
            steps: totals.steps.mapValues(LatencyStats.init), stepOrder: recorder.stepNames, stages: recorder.stages,
            intervals: recorder.intervals.map {
                LoadSummary.Interval(
                    start: $0.start, length: $0.length, completed: $0.completed, errors: $0.errors, dropped: $0.dropped,
                    corrected: $0.corrected, uncorrected: $0.uncorrected)
            },
            correctedDistribution: LoadSummary.distribution(totals.corrected),
            uncorrectedDistribution: LoadSummary.distribution(totals.uncorrected),
            thresholds: results, abortedBy: abortedBy, passed: abortedBy == nil && results.allSatisfy(\.passed))
    }
}

/// The concurrent part of a run, as tasks of one group: a scheduler hands each arrival, at its
/// intended time, to its device's queue; a worker per device performs them; a ticker reports
/// progress and checks `abortOnFail` thresholds. Cancelling the task that runs it cancels them all.
private struct OpenLoop: Sendable {
    let configuration: LoadConfiguration
    let devices: [any LoadDevice]
    let recorder: LoadRecorder
    let admission: Admission
    let start: ContinuousClock.Instant
    let progress: (@Sendable (LoadProgress) -> Void)?
    let logger: Logger
    let clock: any FleetClock
    let queues: [(stream: AsyncStream<Arrival>, continuation: AsyncStream<Arrival>.Continuation)]
    /// Set by the ticker when an `abortOnFail` threshold fails.
    let abort = AbortReason()
    /// Ends the arrivals early: the ``LoadStop`` or the ticker.
    let halt = Halt()

    init(
        configuration: LoadConfiguration, devices: [any LoadDevice], recorder: LoadRecorder, admission: Admission,
        start: ContinuousClock.Instant, progress: (@Sendable (LoadProgress) -> Void)?, logger: Logger, clock: any FleetClock
    ) {
        self.clock = clock
        self.configuration = configuration
        self.devices = devices
        self.recorder = recorder
        self.admission = admission
        self.start = start
        self.progress = progress
        self.logger = logger
        queues = devices.map { _ in AsyncStream<Arrival>.makeStream() }
    }

    /// Returns when every admitted ceremony has finished or the drain deadline has passed.
    func run(stop: LoadStop) async {
        stop.whenStopped { [halt] in halt.fire() }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await tick() }
            await withTaskGroup(of: Void.self) { drain in
                drain.addTask { await work() }
                // Drain: after the last arrival, outstanding ceremonies get `drainTimeout` to finish.
                drain.addTask {
                    await feed()
                    try? await clock.sleep(for: configuration.drainTimeout)
                }
                // The workers end only after the last arrival (when the queues finish), so what
                // ends first ends the drain: everything finished, or the deadline passed.
                await drain.next()
                drain.cancelAll()
            }
            group.cancelAll()
        }
    }

    /// One worker per device: its ceremonies one after another, in arrival order.
    private func work() async {
        await withTaskGroup(of: Void.self) { group in
            for (index, device) in devices.enumerated() {
                let stream = queues[index].stream
                group.addTask {
                    for await arrival in stream {
                        let began = clock.now - start
                        do {
                            let steps = try await device.perform(ceremony: arrival.index)
                            recorder.recordSuccess(
                                stage: arrival.stage, intended: arrival.offset, started: began, finished: clock.now - start, steps: steps)
                        } catch {
                            if Task.isCancelled { return }  // the drain deadline passed (or the run was cancelled): unfinished
                            recorder.recordFailure(stage: arrival.stage, kind: ErrorKind.of(error), at: clock.now - start)
                        }
                        admission.finished(arrival)
                    }
                }
            }
        }
    }

    /// Hands out the arrivals until the schedule ends or the run is halted, then closes the queues.
    private func feed() async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await dispatch() }
            // A halt wakes the dispatch from its sleep until the next arrival (at once when already stopped).
            group.addTask { await halt.wait() }
            await group.next()
            group.cancelAll()
        }
        for queue in queues { queue.continuation.finish() }
    }

    private func dispatch() async {
        let schedule = ArrivalSchedule(
            profile: configuration.profile, process: configuration.process, devices: devices.count, seed: configuration.seed)
        for arrival in schedule {
            let due = start + arrival.offset
            if clock.now < due {
                do { try await clock.sleep(until: due, tolerance: nil) } catch { break }
            }
            if Task.isCancelled || halt.isFired || abort.value != nil { break }
            recorder.recordArrival(stage: arrival.stage, lag: clock.now - due)
            if admission.admit(arrival) {
                queues[arrival.device].continuation.yield(arrival)
            } else {
                recorder.recordDrop(stage: arrival.stage, at: clock.now - start)
            }
        }
    }

    /// A progress line per interval, and the `abortOnFail` thresholds against the figures so far.
    private func tick() async {
        var previous = (completed: 0, arrivals: 0, elapsed: Duration.zero)
        var tick = start
        while !Task.isCancelled {
            tick += configuration.interval
            do { try await clock.sleep(until: tick, tolerance: nil) } catch { return }
            let elapsed = clock.now - start
            recorder.advance(to: elapsed)
            let totals = recorder.totals
            // Over the time since the last line (a busy machine may wake the ticker late).
            let seconds = max((elapsed - previous.elapsed).seconds, 0.001)
            progress?(
                LoadProgress(
                    elapsed: elapsed, rate: Double(totals.completed - previous.completed) / seconds,
                    offeredRate: Double(totals.arrivals - previous.arrivals) / seconds, outstanding: admission.outstanding,
                    completed: totals.completed, errors: totals.errorCount, dropped: totals.dropped,
                    p99: LatencyStats(totals.corrected).p99))
            previous = (totals.completed, totals.arrivals, elapsed)
            if totals.completed >= configuration.abortMinimumCompleted {
                let figures = LoadFigures(totals, seconds: elapsed.seconds)
                if let failed = configuration.thresholds.first(where: { $0.abortOnFail && !$0.evaluate(figures).passed }) {
                    abort.value = failed.source
                    halt.fire()
                    logger.notice("threshold failed; stopping early", metadata: ["threshold": "\(failed.source)"])
                }
            }
        }
    }
}

/// A finished run: the summary and the recorder (histograms and intervals, for the reports).
public struct LoadRun: Sendable {
    public var summary: LoadSummary
    public let recorder: LoadRecorder
}

/// Ends a run's arrivals early (a ``LoadStop``, an `abortOnFail` threshold): the scheduler checks it
/// before each arrival and waits on it beside its sleep until the next one.
final class Halt: Sendable {
    private let fired = Mutex(false)
    private let signal = AsyncStream<Never>.makeStream()

    var isFired: Bool { fired.withLock { $0 } }

    func fire() {
        fired.withLock { $0 = true }
        signal.continuation.finish()
    }

    /// Returns once fired, or when the calling task is cancelled. One waiter at a time.
    func wait() async {
        for await _ in signal.stream {}
    }
}

/// The threshold that stopped the run early, shared by the ticker and the scheduler.
final class AbortReason: Sendable {
    private let state = Mutex<String?>(nil)
    var value: String? {
        get { state.withLock { $0 } }
        set { state.withLock { $0 = newValue } }
    }
}

/// Ends a run's arrivals from outside (`signfleet load` on SIGINT/SIGTERM): no new ceremony
/// starts, the outstanding ones drain (``LoadConfiguration/drainTimeout``), the audit runs and the
/// summary says ``LoadSummary/interrupted``, as after an `abortOnFail` threshold.
public final class LoadStop: Sendable {
    private struct State {
        var stopped = false
        var handlers: [@Sendable () -> Void] = []
    }

    private let state = Mutex(State())

    public init() {}

    public var isStopped: Bool { state.withLock { $0.stopped } }

    /// Stops the arrivals; later calls do nothing.
    public func stop() {
        let handlers = state.withLock { state -> [@Sendable () -> Void] in
            guard !state.stopped else { return [] }
            state.stopped = true
            defer { state.handlers = [] }
            return state.handlers
        }
        for handler in handlers { handler() }
    }

    /// Calls `handler` on ``stop()``, or at once when it has been called already.
    func whenStopped(_ handler: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            if state.stopped { return true }
            state.handlers.append(handler)
            return false
        }
        if now { handler() }
    }
}
