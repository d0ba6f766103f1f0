import Logging

/// Rate-limited logging of refused input: the first occurrence of each kind is logged at once,
/// later ones are counted and summarised at most once per `interval` (one line with the count),
/// so a peer sending 100,000 bad messages costs a few log lines, not 100,000.
/// Shared by the ZeroMQ server and the coordinator's HTTP listener; kinds must be fixed strings
/// (never peer input), so the table stays small.
public struct RefusalLog: Sendable {
    public var interval: Duration
    private var counts: [String: Int] = [:]
    private var lastSummary: ContinuousClock.Instant

    /// - Parameters:
    ///   - interval: at most one summary line in this time.
    ///   - now: when the first summary period starts (tests pass their own clock's time).
    public init(interval: Duration = .seconds(10), now: ContinuousClock.Instant = .now) {
        self.interval = interval
        lastSummary = now
    }

    /// Records one refusal of `kind`; logs it when it is the first, or writes the summary when due.
    public mutating func note(_ kind: String, logger: Logger, now: ContinuousClock.Instant = .now) {
        if counts[kind] == nil {
            counts[kind] = 0
            logger.notice("\(kind) (further ones are counted and summarised every \(interval))")
            return
        }
        counts[kind, default: 0] += 1
        guard lastSummary.duration(to: now) >= interval else { return }
        lastSummary = now
        for (kind, count) in counts.sorted(by: { $0.key < $1.key }) where count > 0 {
            logger.notice("\(kind): \(count) more since the last summary")
            counts[kind] = 0
        }
    }
}
