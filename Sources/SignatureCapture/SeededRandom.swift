/// A small, fast, seedable pseudo-random generator (SplitMix64).
///
/// Every random choice in SignatureCapture flows from one of these, so the same seed always
/// gives the same signature, byte for byte, on the same platform.
///
/// ```swift
/// var rng = SeededRandom(seed: 42)
/// let x = rng.nextDouble()   // in [0, 1)
/// ```
public struct SeededRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// Creates a generator from a seed. Different seeds give independent streams.
    public init(seed: UInt64) {
        state = seed &+ 0x9E37_79B9_7F4A_7C15
    }

    /// Creates a generator from several values mixed together (for example signer, signing, attempt).
    public init(mixing values: UInt64...) {
        var s: UInt64 = 0x1234_5678_9ABC_DEF0
        for v in values { s = SeededRandom.mix(s ^ SeededRandom.mix(v &+ 0x9E37_79B9_7F4A_7C15)) }
        state = s
    }

    /// Returns the next 64 random bits.
    public mutating func next() -> UInt64 {
        state = state &+ 0x9E37_79B9_7F4A_7C15
        return SeededRandom.mix(state)
    }

    @inline(__always) static func mix(_ value: UInt64) -> UInt64 {
        var z = value
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A uniform double in [0, 1).
    public mutating func nextDouble() -> Double {
        Double(next() >> 11) * 0x1.0p-53
    }

    /// A uniform double in `range`.
    public mutating func uniform(_ range: ClosedRange<Double>) -> Double {
        range.lowerBound + (range.upperBound - range.lowerBound) * nextDouble()
    }

    /// A normally distributed double (Box–Muller).
    public mutating func gaussian(mean: Double = 0, deviation: Double = 1) -> Double {
        var u1 = nextDouble()
        if u1 < 1e-300 { u1 = 1e-300 }
        let u2 = nextDouble()
        return mean + deviation * (-2 * _log(u1)).squareRoot() * _cos(2 * Double.pi * u2)
    }

    /// An exponentially distributed double with the given mean.
    public mutating func exponential(mean: Double) -> Double {
        var u = nextDouble()
        if u < 1e-300 { u = 1e-300 }
        return -mean * _log(u)
    }

    /// A uniform integer in `range`.
    public mutating func int(in range: ClosedRange<Int>) -> Int {
        let span = UInt64(range.upperBound - range.lowerBound + 1)
        return range.lowerBound + Int(next() % span)
    }
}
