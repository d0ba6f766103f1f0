/// The clock a component waits, times out, backs off and measures on.
///
/// Every library component that waits for time (request timeouts, retries and back-off,
/// heartbeats and liveness, rate limits) takes one, `ContinuousClock()` by default. Its instants
/// are `ContinuousClock.Instant`s, so the durations a component measures and the deadlines it
/// keeps are the same type whichever clock runs it; a test injects a `ManualClock` (FleetTesting),
/// whose time moves only when the test advances it, and so waits on events, never on the machine's
/// speed.
///
/// Wall-clock time (`Date`) is for what a person reads or a store keeps as a timestamp, never for
/// a wait.
public protocol FleetClock: Clock where Instant == ContinuousClock.Instant {}

extension ContinuousClock: FleetClock {}

extension FleetClock {
    /// Time passed since `instant` on this clock.
    public func elapsed(since instant: ContinuousClock.Instant) -> Duration {
        instant.duration(to: now)
    }
}

extension Duration {
    /// The duration in (fractional) seconds, for what is shown or stored as seconds.
    public var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}

extension FleetClock {
    /// Sleeps `duration` of time in which this process ran. A wake-up later than `tolerance`
    /// past its deadline means the process was stopped or starved of CPU (a node process at nice 19
    /// on a full machine), and what its peers sent meanwhile may still be unread in its sockets:
    /// it sleeps once more, for that lateness but at most `duration`, so the receive path gets its
    /// turn before a timeout blames the peer. The coordinator's liveness sweep excuses its own
    /// absence the same way (docs/protocol.md, "Heartbeats and liveness").
    public func sleep(ownTimeFor duration: Duration, tolerance: Duration) async throws {
        let deadline = now.advanced(by: duration)
        try await sleep(until: deadline, tolerance: nil)
        let late = deadline.duration(to: now)
        guard late > tolerance else { return }
        try await sleep(for: min(late, duration))
    }
}
