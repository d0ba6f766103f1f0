/// Exponential back-off between attempts: a ceiling that starts at `initial` and doubles with
/// each failure up to `maximum`, reset on success.
///
/// With a jitter seed the delay is *full jitter* (AWS Builders' Library, "Timeouts, retries, and
/// backoff with jitter"): drawn uniformly from `0...ceiling` by a SplitMix64 generator seeded with
/// it, so clients that failed together (a fleet coming back after an outage, every device of a
/// restarted coordinator) do not come back together, and the same seed gives the same delays.
/// Without one the delay is the ceiling itself.
public struct Backoff: Sendable, Hashable {
    public var initial: Duration
    public var maximum: Duration
    /// The ceiling of the next delay.
    public private(set) var current: Duration
    /// Seeds the jitter; nil: no jitter.
    public let jitterSeed: UInt64?
    private var random: UInt64

    public init(initial: Duration = .milliseconds(250), maximum: Duration = .seconds(30), jitterSeed: UInt64? = nil) {
        self.initial = max(.zero, initial)
        self.maximum = max(self.initial, maximum)
        self.current = self.initial
        self.jitterSeed = jitterSeed
        self.random = jitterSeed ?? 0
    }

    /// The same back-off with full jitter seeded by `seed`.
    public func jittered(seed: UInt64) -> Backoff {
        Backoff(initial: initial, maximum: maximum, jitterSeed: seed)
    }

    /// The delay to wait now; the next ceiling is twice this one's (capped).
    public mutating func next() -> Duration {
        let ceiling = current
        current = min(current * 2, maximum)
        guard jitterSeed != nil else { return ceiling }
        // At most a day is drawn from (a "no cap" maximum such as `.seconds(.max)` must not trap
        // the conversion to nanoseconds).
        let bounded = min(ceiling, .seconds(86_400))
        let nanoseconds = bounded.components.seconds * 1_000_000_000 + bounded.components.attoseconds / 1_000_000_000
        guard nanoseconds > 0 else { return .zero }
        // Uniform in 0...nanoseconds; the modulo bias is below 2^-18 for a day's ceiling.
        return .nanoseconds(Int64(nextRandom() % UInt64(nanoseconds + 1)))
    }

    /// A stable jitter seed for `id` (FNV-1a of its UTF-8 bytes, mixed with `salt`): the same
    /// device draws the same delays from run to run, and different devices different ones.
    public static func jitterSeed(for id: String, salt: UInt64 = 0) -> UInt64 {
        id.utf8.reduce(0xCBF2_9CE4_8422_2325 ^ salt) { ($0 ^ UInt64($1)) &* 0x0000_0100_0000_01B3 }
    }

    public mutating func reset() {
        current = initial
    }

    /// SplitMix64.
    private mutating func nextRandom() -> UInt64 {
        random &+= 0x9E37_79B9_7F4A_7C15
        var z = random
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
