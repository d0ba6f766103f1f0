import Foundation

/// The tests' one seeded random generator (SplitMix64): small, fast, the same sequence on every
/// platform, so a failing run replays from its printed seed.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A number in `0..<bound` (`bound` > 0).
    public mutating func below(_ bound: Int) -> Int {
        precondition(bound > 0, "below(\(bound)): the bound must be positive")
        return Int(next() % UInt64(bound))
    }
}

/// The seed of a randomised test: `SIGNFLEET_SEED` when set (to replay a run), otherwise a fresh
/// one. Always printed with `name`, so every failure can be replayed.
public func testSeed(_ name: String) -> UInt64 {
    let seed: UInt64
    if let text = ProcessInfo.processInfo.environment["SIGNFLEET_SEED"], let value = UInt64(text) {
        seed = value
    } else {
        seed = UInt64.random(in: 1...UInt64(UInt32.max))
    }
    print("\(name): seed \(seed) (replay with SIGNFLEET_SEED=\(seed))")
    return seed
}
