import Dispatch
import FleetProtocol
import Foundation
import Synchronization

/// Time as a simulated device sees it: what time it is, and a one-shot timer.
///
/// ``SimulatedDevice`` reads the time and waits only through its clock, so a test can run a
/// device's loop on a clock it moves by hand. Time is seconds since the Unix epoch, as the
/// node plan's `runStart` is.
public protocol DeviceClock: Sendable {
    /// Seconds since the Unix epoch.
    var now: Double { get }
    /// Calls `action` once, at `deadline` (seconds since the Unix epoch) or soon after, unless
    /// the returned timer is cancelled first. No task is created for the wait.
    func schedule(at deadline: Double, _ action: @escaping @Sendable () -> Void) -> any DeviceTimer
}

/// A timer from ``DeviceClock/schedule(at:_:)``.
public protocol DeviceTimer: Sendable {
    /// Makes sure the action does not run (when it has not yet run).
    func cancel()
}

extension DeviceClock {
    /// This clock's time as a wall-clock source, for what the device stamps (its store's
    /// receipts, its history lines), so a device on a hand-moved clock stamps hand-moved times.
    public var wall: WallClock { WallClock { Date(timeIntervalSince1970: self.now) } }
}

/// The wall clock: `WallClock.system` (FleetProtocol) for the time, and libdispatch's timers for the waits, all on one
/// serial queue per process (one thread at most, whatever the number of devices: an action only
/// resumes a waiting device).
public struct WallDeviceClock: DeviceClock {
    private static let queue = DispatchQueue(label: "signfleet.device-clock")

    public init() {}

    public var now: Double { WallClock.system.secondsSince1970 }

    public func schedule(at deadline: Double, _ action: @escaping @Sendable () -> Void) -> any DeviceTimer {
        let timer = OneShot(action)
        let delay = max(0, deadline - now)
        // Nanoseconds, bounded so the conversion cannot trap (a device never waits more than a day).
        let nanoseconds = Int(exactly: (min(delay, 86_400 * 2) * 1e9).rounded(.down)) ?? 0
        Self.queue.asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { timer.fire() }
        return timer
    }

    /// The action, until it runs or is cancelled (cancelling drops what it captured).
    private final class OneShot: DeviceTimer {
        private let action: Mutex<(@Sendable () -> Void)?>

        init(_ action: @escaping @Sendable () -> Void) {
            self.action = Mutex<(@Sendable () -> Void)?>(action)
        }

        func fire() {
            let action = self.action.withLock { action in
                defer { action = nil }
                return action
            }
            action?()
        }

        func cancel() {
            action.withLock { $0 = nil }
        }
    }
}

/// One device's wait: suspends its loop until a deadline on a ``DeviceClock`` or until
/// ``ring()`` (a drain, a stop), whichever comes first. One wait at a time.
///
/// A ring while nobody waits is kept: the next wait returns at once (the loop then looks at
/// its state again). A timer left over from an earlier wait never ends a later one.
final class DeviceWakeup: Sendable {
    private struct State {
        var waiter: CheckedContinuation<Void, Never>?
        var timer: (any DeviceTimer)?
        /// Counts waits, so a late timer of an earlier wait is told apart.
        var generation: UInt64 = 0
        var rung = false
    }

    private let state = Mutex(State())

    /// Waits until `deadline` on `clock`, a ``ring()``, or the task's cancellation.
    func wait(until deadline: Double, on clock: any DeviceClock) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let generation: UInt64? = state.withLock { state in
                    if state.rung {
                        state.rung = false
                        return nil
                    }
                    state.generation += 1
                    state.waiter = continuation
                    return state.generation
                }
                guard let generation else {
                    continuation.resume()
                    return
                }
                let timer = clock.schedule(at: deadline) { [weak self] in self?.fire(generation) }
                let stillWaiting = state.withLock { state in
                    guard state.generation == generation, state.waiter != nil else { return false }
                    state.timer = timer
                    return true
                }
                if !stillWaiting { timer.cancel() }
            }
        } onCancel: {
            self.ring()
        }
    }

    /// Whether a wait is in progress (for tests: a wait that should go on is still there).
    var isWaiting: Bool { state.withLock { $0.waiter != nil } }

    /// Ends the current wait, or the next one at once when nobody waits now.
    func ring() {
        let (waiter, timer) = state.withLock { state -> (CheckedContinuation<Void, Never>?, (any DeviceTimer)?) in
            guard let waiter = state.waiter else {
                state.rung = true
                return (nil, nil)
            }
            defer {
                state.waiter = nil
                state.timer = nil
            }
            return (waiter, state.timer)
        }
        timer?.cancel()
        waiter?.resume()
    }

    private func fire(_ generation: UInt64) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard state.generation == generation, let waiter = state.waiter else { return nil }
            state.waiter = nil
            state.timer = nil
            return waiter
        }
        waiter?.resume()
    }
}
