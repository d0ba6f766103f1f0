/// A small seedable pseudo-random generator (SplitMix64) for every random choice the fault
/// proxy makes: toxicity draws, latency jitter, slice sizes.
///
/// Decisions are derived from the values that identify them (seed, proxy, connection number,
/// toxic), not from a shared stream, so they do not depend on which event-loop thread happens
/// to ask first: the same seed and the same sequence of connections give the same decisions.
///
/// ```swift
/// var random = ChaosRandom(mixing: seed, ChaosRandom.hash("coordinator"), 7)
/// let applies = random.nextDouble() < toxicity
/// ```
public struct ChaosRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// A generator from one seed.
    public init(seed: UInt64) {
        state = seed &+ 0x9E37_79B9_7F4A_7C15
    }

    /// A generator from several values mixed together (seed, proxy, connection, …).
    public init(mixing values: UInt64...) {
        self.init(mixing: values)
    }

    /// A generator from several values mixed together.
    public init(mixing values: [UInt64]) {
        var mixed: UInt64 = 0x5EED_C4A0_5EED_C4A0
        for value in values { mixed = Self.mix(mixed ^ Self.mix(value &+ 0x9E37_79B9_7F4A_7C15)) }
        state = mixed
    }

    public mutating func next() -> UInt64 {
        state = state &+ 0x9E37_79B9_7F4A_7C15
        return Self.mix(state)
    }

    /// A uniform double in [0, 1).
    public mutating func nextDouble() -> Double {
        Double(next() >> 11) * 0x1.0p-53
    }

    /// A uniform integer in `range` (both ends included).
    public mutating func nextInt(in range: ClosedRange<Int>) -> Int {
        Int.random(in: range, using: &self)
    }

    /// A stable 64-bit hash of a string (FNV-1a): `String.hashValue` changes between runs.
    public static func hash(_ text: String) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        return hash
    }

    @inline(__always) static func mix(_ value: UInt64) -> UInt64 {
        var z = value
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
