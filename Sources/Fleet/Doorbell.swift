import FleetProtocol
import Synchronization

/// Wakes whoever waits for "something changed" (an event count): the launcher's and the
/// supervisor's waits check their condition, then sleep until the next ring instead of polling.
///
/// A waiter reads ``generation`` *before* it checks its condition and passes it to
/// ``wait(after:)``: a ring between the check and the wait is not lost, the wait returns at once.
///
/// ```swift
/// while true {
///     let seen = bell.generation
///     if conditionHolds() { break }
///     await bell.wait(after: seen)
/// }
/// ```
final class Doorbell: Sendable {
    private struct State {
        var generation: UInt64 = 0
        var nextWaiter: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    }

    private let state = Mutex(State())

    init() {}

    /// How many times it has rung.
    var generation: UInt64 { state.withLock { $0.generation } }

    /// Wakes every current waiter.
    func ring() {
        let woken = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.generation &+= 1
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in woken { waiter.resume() }
    }

    /// Returns once it has rung after `seen` (at once if it already has), or when the task is cancelled.
    func wait(after seen: UInt64) async {
        let id = state.withLock { state -> UInt64 in
            state.nextWaiter &+= 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    // Cancelled before this registration: the handler found nothing to resume.
                    if state.generation != seen || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }

    /// As ``wait(after:)``, for at most `timeout` on `clock`; true when it rang.
    func wait(after seen: UInt64, atMost timeout: Duration, clock: any FleetClock = ContinuousClock()) async -> Bool {
        guard timeout > .zero else { return generation != seen }
        return await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await self.wait(after: seen)
                return !Task.isCancelled
            }
            group.addTask {
                try? await clock.sleep(for: timeout)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }
}
