/// One stroke of the sigma-lognormal (Kinematic Theory) handwriting model.
///
/// A stroke's speed is a lognormal function of time,
/// `|v(t)| = D / (σ √(2π) (t − t0)) · exp(−(ln(t − t0) − μ)² / (2σ²))`,
/// and its direction turns linearly with the distance covered, from ``thetaStart`` to ``thetaEnd``.
/// Each stroke therefore traces a circular arc, and its displacement has a closed form.
/// A signature is the vector sum of overlapping strokes.
public struct SigmaLognormalStroke: Hashable, Sendable {
    /// D: the distance covered along the stroke, in millimetres.
    public var amplitude: Double
    /// t0: the time the stroke's command is issued, in seconds.
    public var startTime: Double
    /// μ: log-time delay.
    public var mu: Double
    /// σ: log-response time.
    public var sigma: Double
    /// θs: initial direction in radians (y up).
    public var thetaStart: Double
    /// θe: final direction in radians.
    public var thetaEnd: Double
    /// Whether the pen touches the surface during this stroke (false for the lifts between words).
    public var penDown: Bool

    /// Creates a stroke.
    public init(amplitude: Double, startTime: Double, mu: Double, sigma: Double,
                thetaStart: Double, thetaEnd: Double, penDown: Bool = true) {
        self.amplitude = amplitude
        self.startTime = startTime
        self.mu = mu
        self.sigma = sigma
        self.thetaStart = thetaStart
        self.thetaEnd = thetaEnd
        self.penDown = penDown
    }

    /// The fraction of ``amplitude`` covered at time `t` (the lognormal CDF).
    public func progress(at t: Double) -> Double {
        let dt = t - startTime
        guard dt > 0 else { return 0 }
        return 0.5 * (1 + _erf((_log(dt) - mu) / (sigma * 1.4142135623730951)))
    }

    /// The speed at time `t`, in millimetres per second.
    public func speed(at t: Double) -> Double {
        let dt = t - startTime
        guard dt > 0 else { return 0 }
        let z = (_log(dt) - mu) / sigma
        return amplitude / (sigma * 2.5066282746310002 * dt) * _exp(-0.5 * z * z)
    }

    /// The displacement after covering `fraction` of the stroke.
    public func displacement(fraction: Double) -> (x: Double, y: Double) {
        let turn = thetaEnd - thetaStart
        if abs(turn) < 1e-6 {
            let d = amplitude * fraction
            return (d * _cos(thetaStart), d * _sin(thetaStart))
        }
        let phi = thetaStart + turn * fraction
        let k = amplitude / turn
        return (k * (_sin(phi) - _sin(thetaStart)), k * (_cos(thetaStart) - _cos(phi)))
    }

    /// The time at which the stroke has covered the lognormal quantile `z` (z = 0 is the median).
    public func time(atQuantile z: Double) -> Double {
        startTime + _exp(mu + sigma * z)
    }
}

/// A simulated signer: a stable signature (stroke parameters derived from the seed) and a hand
/// that varies a little each time it signs.
///
/// ```swift
/// let signer = SignerProfile(seed: 42)
/// let first = signer.strokes(forSigning: 1)
/// let second = signer.strokes(forSigning: 2)   // alike, not identical
/// ```
public struct SignerProfile: Hashable, Sendable {
    /// The seed the signature derives from.
    public let seed: UInt64
    /// The signer's identifier, recorded in the binding.
    public var identifier: String
    /// The signer's stable signature: the unperturbed stroke parameters.
    public let strokes: [SigmaLognormalStroke]
    /// Typical pressure, 0–1.
    public let basePressure: Double
    /// Typical pen altitude in radians (angle above the surface).
    public let altitude: Double
    /// Typical pen azimuth in radians.
    public let azimuth: Double
    /// Forward slant of the handwriting in radians.
    public let slant: Double
    /// Horizontal stretch of the handwriting (wide or narrow writers).
    public let stretch: Double

    /// Creates a signer whose signature is fully determined by `seed`.
    /// - Parameters:
    ///   - seed: the signer's seed; equal seeds give equal signers.
    ///   - identifier: defaults to `"signer-<seed>"`.
    public init(seed: UInt64, identifier: String? = nil) {
        self.seed = seed
        self.identifier = identifier ?? "signer-\(seed)"
        var r = SeededRandom(mixing: seed, 0x5167_4E52)
        slant = r.uniform(-0.12...0.32)
        basePressure = r.uniform(0.45...0.75)
        altitude = r.uniform(0.85...1.2)
        azimuth = r.uniform(0.3...1.4)
        stretch = r.uniform(1.3...2.0)
        strokes = SignerProfile.makeTemplate(&r)
    }

    private static func makeTemplate(_ r: inout SeededRandom) -> [SigmaLognormalStroke] {
        let size = r.uniform(0.8...1.25)
        let tempo = r.uniform(0.85...1.15)
        let components = r.int(in: 2...3)
        var strokes: [SigmaLognormalStroke] = []
        var t = 0.0
        var y = 0.0
        for component in 0..<components {
            let count = component == 0 && components == 3 ? r.int(in: 3...5) : r.int(in: 6...10)
            let baseline = r.gaussian(deviation: 1.0)
            let height = r.uniform(7...13) * size
            for i in 0..<count {
                let up = i % 2 == 0
                let angle = up ? r.uniform(0.75...1.2) : r.uniform(-1.95 ... -1.6)
                var turn = r.gaussian(deviation: 0.5)
                if r.nextDouble() < 0.25 { turn = (r.nextDouble() < 0.5 ? -1 : 1) * r.uniform(1.8...3.6) }
                let sinc = abs(turn) < 1e-6 ? 1 : _sin(turn / 2) / (turn / 2)
                let targetY = up ? baseline + height * r.uniform(0.5...1.3) : baseline + r.gaussian(deviation: 0.6)
                var chord = (targetY - y) / _sin(angle)
                chord = min(max(chord, 2.5), 26)
                let amplitude = chord / max(abs(sinc), 0.2)
                y += chord * _sin(angle)
                strokes.append(SigmaLognormalStroke(
                    amplitude: amplitude, startTime: t,
                    mu: _log(r.uniform(0.16...0.26) * tempo), sigma: r.uniform(0.18...0.3),
                    thetaStart: angle - turn / 2, thetaEnd: angle + turn / 2, penDown: true))
                t += r.uniform(0.1...0.15) * tempo
            }
            if component < components - 1 {
                let angle = r.uniform(-0.3...0.15)
                let amplitude = r.uniform(10...20) * size
                strokes.append(SigmaLognormalStroke(
                    amplitude: amplitude, startTime: t + 0.02, mu: _log(0.22 * tempo), sigma: 0.22,
                    thetaStart: angle - 0.2, thetaEnd: angle + 0.2, penDown: false))
                y += amplitude * _sin(angle)
                t += r.uniform(0.26...0.34) * tempo
            }
        }
        if r.nextDouble() < 0.6 {
            let angle = r.uniform(-0.35...0.2)
            let turn = (r.nextDouble() < 0.5 ? -1 : 1) * r.uniform(0.6...1.6)
            strokes.append(SigmaLognormalStroke(
                amplitude: r.uniform(18...34) * size, startTime: t, mu: _log(0.3 * tempo), sigma: 0.25,
                thetaStart: angle - turn / 2, thetaEnd: angle + turn / 2, penDown: true))
        }
        return strokes
    }

    /// The strokes of one signing act: the stable signature perturbed slightly, deterministically
    /// from (seed, signing, attempt).
    /// - Parameters:
    ///   - signing: which signing this is (1, 2, …); each gives a different, similar signature.
    ///   - attempt: retry number within a capture (palm restart, border alert); 1 for the first try.
    public func strokes(forSigning signing: Int, attempt: Int = 1) -> [SigmaLognormalStroke] {
        var r = SeededRandom(mixing: seed, UInt64(truncatingIfNeeded: signing), UInt64(truncatingIfNeeded: attempt), 0x9E7)
        let tempo = _exp(r.gaussian(deviation: 0.04))
        let logTempo = _log(tempo)
        var result = strokes
        for i in result.indices {
            result[i].amplitude *= _exp(r.gaussian(deviation: 0.05))
            result[i].startTime = result[i].startTime * tempo + r.gaussian(deviation: 0.006)
            result[i].mu += logTempo + r.gaussian(deviation: 0.04)
            result[i].sigma *= _exp(r.gaussian(deviation: 0.05))
            result[i].thetaStart += r.gaussian(deviation: 0.05)
            result[i].thetaEnd += r.gaussian(deviation: 0.05)
        }
        return result
    }
}
