/// Exponential back-off between reconnection attempts: `initial`, doubling
/// each failure up to `maximum`, reset on success.
public struct Backoff: Sendable, Hashable {
    public var initial: Duration
    public var maximum: Duration
    public private(set) var current: Duration

    public init(initial: Duration = .milliseconds(250), maximum: Duration = .seconds(30)) {
        self.initial = initial
        self.maximum = max(initial, maximum)
        self.current = initial
    }

    /// The delay to wait now; the next call returns twice as much (capped).
    public mutating func next() -> Duration {
        let delay = current
        current = min(current * 2, maximum)
        return delay
    }

    public mutating func reset() {
        current = initial
    }
}
