import FleetProtocol
import Foundation
import Synchronization

/// A clock whose time moves only when the test moves it.
///
/// Inject it where a component takes a `FleetProtocol.FleetClock`: the component's sleeps
/// (timeouts, back-off, heartbeats) suspend until ``advance(by:)`` passes their deadline, so a
/// test of a timeout does not wait for one, and a test that is not about timeouts never sees one
/// fire however slow the machine is.
///
/// Sleepers become due in deadline order, ties in the order they started sleeping; each is resumed
/// in turn, with the clock's `now` at its deadline. `sleeping(atLeast:)` waits until a component
/// has reached its wait, so a test advances time only once there is something to advance past.
///
/// ```swift
/// let clock = ManualClock()
/// let waiting = Task { try await clock.sleep(for: .seconds(5)) }
/// await clock.sleeping(atLeast: 1)
/// await clock.advance(by: .seconds(5))   // the sleep returns
/// ```
public final class ManualClock: FleetClock, Sendable {
    public typealias Duration = Swift.Duration
    public typealias Instant = ContinuousClock.Instant

    private struct Sleeper {
        var id: UInt64
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct Watcher {
        var id: UInt64
        /// Whether the sleeps now waiting (how far ahead each deadline is) are what it waits for.
        var isSatisfied: @Sendable ([Duration]) -> Bool
        var continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        var now: Instant
        var nextID: UInt64 = 0
        var sleepers: [Sleeper] = []
        /// Sleeps cancelled before their continuation was stored.
        var cancelled: Set<UInt64> = []
        var watchers: [Watcher] = []

        var remaining: [Duration] { sleepers.map { now.duration(to: $0.deadline) } }

        mutating func resumeWatchers() -> [CheckedContinuation<Void, Never>] {
            let remaining = self.remaining
            let ready = watchers.filter { $0.isSatisfied(remaining) }
            watchers.removeAll { $0.isSatisfied(remaining) }
            return ready.map(\.continuation)
        }
    }

    private let state: Mutex<State>

    /// A clock that reads `start` until it is advanced (by default the continuous clock's now, so
    /// instants it hands out compare sensibly with ones taken before the test).
    /// The wall-clock time this clock reads at its start (see ``wall``).
    public let wallStart: Date
    private let start: Instant

    /// A clock at `start`, whose ``wall`` reads `wallStart` then (by default 2026-01-01T00:00:00Z,
    /// so stamps in a test do not depend on the day it runs).
    public init(start: Instant = ContinuousClock.now, wallStart: Date = Date(timeIntervalSince1970: 1_767_225_600)) {
        state = Mutex(State(now: start))
        self.start = start
        self.wallStart = wallStart
    }

    /// Wall-clock time that moves with this clock: `wallStart` plus the time advanced since the
    /// start. Give it to the components that stamp, beside this clock to those that wait.
    public var wall: WallClock {
        WallClock { [self] in
            wallStart.addingTimeInterval(start.duration(to: now).seconds)
        }
    }

    public var now: Instant { state.withLock { $0.now } }

    public var minimumResolution: Duration { .zero }

    /// How many sleeps are waiting now.
    public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    /// How far ahead of now each waiting sleep's deadline is, soonest first.
    public var pendingDeadlines: [Duration] {
        state.withLock { $0.remaining.sorted() }
    }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        let id = state.withLock { state -> UInt64 in
            state.nextID &+= 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Outcome { case due, cancelled, waiting([CheckedContinuation<Void, Never>]) }
                let outcome = state.withLock { state -> Outcome in
                    if state.cancelled.remove(id) != nil { return .cancelled }
                    if deadline <= state.now { return .due }
                    state.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    return .waiting(state.resumeWatchers())
                }
                switch outcome {
                case .due: continuation.resume()
                case .cancelled: continuation.resume(throwing: CancellationError())
                case .waiting(let watchers): for watcher in watchers { watcher.resume() }
                }
            }
        } onCancel: {
            let sleeper = state.withLock { state -> Sleeper? in
                guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else {
                    state.cancelled.insert(id)
                    return nil
                }
                return state.sleepers.remove(at: index)
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
        // A cancellation that came after the sleep ended leaves no mark behind.
        _ = state.withLock { $0.cancelled.remove(id) }
    }

    /// Moves time forward by `duration`, resuming every sleep whose deadline it passes, soonest
    /// first. After each resume the caller yields a few times, so the woken task usually runs (and
    /// starts its next sleep, resumed too when it falls inside the advance) before the next one is
    /// resumed; that is a courtesy, not a guarantee: a test that needs a woken task's effect waits
    /// for it as an event.
    public func advance(by duration: Duration) async {
        let target = state.withLock { $0.now.advanced(by: duration) }
        await advance(to: target)
    }

    /// Moves time forward to `target` (never backwards), as ``advance(by:)``.
    public func advance(to target: Instant) async {
        while true {
            let due = state.withLock { state -> Sleeper? in
                guard let index = state.sleepers.indices.filter({ state.sleepers[$0].deadline <= target })
                    .min(by: { (state.sleepers[$0].deadline, state.sleepers[$0].id) < (state.sleepers[$1].deadline, state.sleepers[$1].id) })
                else { return nil }
                let sleeper = state.sleepers.remove(at: index)
                if sleeper.deadline > state.now { state.now = sleeper.deadline }
                return sleeper
            }
            guard let due else { break }
            due.continuation.resume()
            // Give the woken task a chance to run before time moves on (not a guarantee).
            for _ in 0..<8 { await Task.yield() }
        }
        state.withLock { state in
            if target > state.now { state.now = target }
        }
    }

    /// Moves time forward by `duration` at once, as a process that was stopped (SIGSTOP) or
    /// starved of CPU sees it: every sleep whose deadline it passes wakes at the new time, late,
    /// and the sleeps they start then begin there (``advance(by:)`` instead lets time pass while
    /// the process runs: woken tasks sleep again, and wake again, within the advance).
    public func jump(by duration: Duration) async {
        let due = state.withLock { state -> [Sleeper] in
            state.now = state.now.advanced(by: duration)
            let now = state.now
            let due = state.sleepers.filter { $0.deadline <= now }.sorted { ($0.deadline, $0.id) < ($1.deadline, $1.id) }
            state.sleepers.removeAll { $0.deadline <= now }
            return due
        }
        for sleeper in due {
            sleeper.continuation.resume()
            for _ in 0..<8 { await Task.yield() }
        }
    }

    /// Suspends until at least `count` sleeps are waiting on this clock: the event a test waits for
    /// before it advances time (a component has reached its timeout, its back-off, its next tick).
    public func sleeping(atLeast count: Int) async {
        await waitForSleepers { $0.count >= count }
    }

    /// Suspends until a sleep of at least `duration` from now is waiting: a component has started
    /// a wait of that length (a request's reply timeout, say), so advancing by it ends that wait.
    public func sleeping(atLeast duration: Duration) async {
        await waitForSleepers { $0.contains { $0 >= duration } }
    }

    /// Suspends until the waiting sleeps (how far ahead of now each one's deadline is) satisfy
    /// `predicate`; checked now and each time a sleep starts. Returns early when the task is
    /// cancelled (FleetTesting's `withDeadline` guards such a wait against a hang).
    public func waitForSleepers(where predicate: @escaping @Sendable ([Duration]) -> Bool) async {
        let id = state.withLock { state -> UInt64 in
            state.nextID &+= 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = state.withLock { state -> Bool in
                    if predicate(state.remaining) || state.cancelled.remove(id) != nil { return true }
                    state.watchers.append(Watcher(id: id, isSatisfied: predicate, continuation: continuation))
                    return false
                }
                if ready { continuation.resume() }
            }
        } onCancel: {
            let watcher = state.withLock { state -> Watcher? in
                guard let index = state.watchers.firstIndex(where: { $0.id == id }) else {
                    state.cancelled.insert(id)
                    return nil
                }
                return state.watchers.remove(at: index)
            }
            watcher?.continuation.resume()
        }
        _ = state.withLock { $0.cancelled.remove(id) }
    }
}
