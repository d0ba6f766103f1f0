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
