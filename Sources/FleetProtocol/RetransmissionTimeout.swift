/// How long a client waits for a reply: an adaptive retransmission timeout in the manner of TCP's
/// (RFC 6298), kept between a floor and a ceiling.
///
/// A fixed timeout fails exactly when a coordinator is busiest: at a fleet's start or when an
/// outage ends, thousands of devices connect at once, replies take longer than the timeout, and
/// every timeout resends (or, for a `hello`, makes a new connection), which is more work for the
/// server that is already late. Here each timeout doubles the wait (up to the ceiling), and each
/// reply to a request sent once (Karn's rule: a resent request's reply cannot say which send it
/// answers) updates a smoothed round-trip time: `srtt + 4 × rttvar`, never below the floor, which
/// is the configured request timeout, so an idle coordinator sees exactly today's timeouts.
public struct RetransmissionTimeout: Sendable, Hashable {
    /// The shortest wait: the configured request timeout.
    public let floor: Duration
    /// The longest wait.
    public let ceiling: Duration
    private var smoothed: Double?
    private var variation: Double = 0
    /// Set by a timeout, until the next round-trip sample.
    private var backedOff: Duration?

    public init(floor: Duration, ceiling: Duration) {
        self.floor = max(floor, .milliseconds(1))
        self.ceiling = max(self.floor, ceiling)
    }

    /// The wait for the next reply.
    public var current: Duration {
        if let backedOff { return backedOff }
        guard let smoothed else { return floor }
        let estimate = smoothed + max(0.01, 4 * variation)
        return Self.clamp(estimate, floor, ceiling)
    }

    /// How late replies have been coming: `srtt + 4 × rttvar` from the replies seen so far, without
    /// the floor (a configured request timeout says nothing about the server), at most the ceiling;
    /// nil before the first sample. A client allows a server this much more silence before it
    /// declares it lost: a server whose replies take 5 s is slow, not gone, after 3 s of silence.
    public var observedDelay: Duration? {
        guard let smoothed else { return nil }
        return Self.clamp(smoothed + 4 * variation, .zero, ceiling)
    }

    /// A reply to a request sent once arrived after `roundTrip`.
    public mutating func record(roundTrip: Duration) {
        let sample = Self.seconds(roundTrip)
        guard sample.isFinite, sample >= 0 else { return }
        if let smoothed {
            variation = 0.75 * variation + 0.25 * abs(smoothed - sample)
            self.smoothed = 0.875 * smoothed + 0.125 * sample
        } else {
            smoothed = sample
            variation = sample / 2
        }
        backedOff = nil
    }

    /// No reply came within ``current``: the next wait is twice as long, up to ``ceiling``.
    public mutating func timedOut() {
        let doubled = current * 2
        backedOff = doubled > ceiling ? ceiling : doubled
    }

    private static func seconds(_ duration: Duration) -> Double {
        let (whole, fraction) = duration.components
        return Double(whole) + Double(fraction) / 1e18
    }

    private static func clamp(_ seconds: Double, _ low: Duration, _ high: Duration) -> Duration {
        // NaN, infinities and anything past the ceiling end here, so the conversion cannot trap.
        guard seconds < Self.seconds(high), let nanoseconds = Int64(exactly: (seconds * 1e9).rounded(.down)) else { return high }
        let value = Duration.nanoseconds(nanoseconds)
        return value < low ? low : value
    }
}

extension RetransmissionTimeout {
    /// Starts from `other`'s round-trip estimate (`srtt`, `rttvar`), keeping this one's bounds and
    /// no back-off: how a new connection takes over what earlier ones to the same server learnt.
    public mutating func adopt(estimateOf other: RetransmissionTimeout) {
        guard let smoothed = other.smoothed else { return }
        self.smoothed = smoothed
        self.variation = other.variation
        backedOff = nil
    }
}
