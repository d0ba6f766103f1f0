/// One sample as the pen reports it.
///
/// Positions are screen coordinates in millimetres (origin top-left, y down), already quantised to
/// the pen's resolution. Time is exact: ``tick`` counts periods of the pen's sample clock from the
/// first sample, so `time = tick / sampleRate`.
public struct PenSample: Hashable, Sendable {
    /// Horizontal position in millimetres from the screen's left edge.
    public var x: Double
    /// Vertical position in millimetres from the screen's top edge.
    public var y: Double
    /// Normalised pressure 0–1, quantised to the pen's levels; 0 when lifted or when the pen has no pressure.
    public var pressure: Double
    /// Sample-clock ticks since the first sample.
    public var tick: UInt32
    /// Whether the tip touches the surface (false for hover samples).
    public var isDown: Bool
    /// Pen altitude in radians (0 when not reported).
    public var altitude: Double
    /// Pen azimuth in radians (0 when not reported).
    public var azimuth: Double

    /// Creates a sample.
    public init(x: Double, y: Double, pressure: Double, tick: UInt32, isDown: Bool = true,
                altitude: Double = 0, azimuth: Double = 0) {
        self.x = x
        self.y = y
        self.pressure = pressure
        self.tick = tick
        self.isDown = isDown
        self.altitude = altitude
        self.azimuth = azimuth
    }
}

/// Where and how big the signature lands: the signer's aim for one attempt.
struct Placement {
    var centerX: Double
    var centerY: Double
    var scale: Double
    var rotation: Double
}

/// Samples a set of sigma-lognormal strokes at a pen's rate.
enum Synthesizer {
    /// Produces the samples the pen reports (pen-down, plus hover for pens that report it),
    /// placed on screen so that the signature's pen-down bounding box is centred on `placement`.
    static func sample(
        strokes input: [SigmaLognormalStroke],
        signer: SignerProfile,
        pen: PenCharacteristics,
        placement: Placement,
        screen: DeviceScreen
    ) -> [PenSample] {
        let strokes = input.sorted { $0.startTime < $1.startTime }
        guard !strokes.isEmpty else { return [] }
        let rate = Double(pen.sampleRate)
        var tStart = Double.infinity
        var tEnd = -Double.infinity
        // Lifts: from the 10% to the 90% quantile of each pen-up stroke.
        var lifts: [(Double, Double)] = []
        for s in strokes {
            tStart = min(tStart, s.time(atQuantile: -2.6))
            tEnd = max(tEnd, s.time(atQuantile: 2.6))
            if !s.penDown { lifts.append((s.time(atQuantile: -1.2816), s.time(atQuantile: 1.2816))) }
        }
        lifts.sort { $0.0 < $1.0 }
        let firstTick = Int((tStart * rate).rounded(.up))
        let lastTick = Int((tEnd * rate).rounded(.down))
        guard lastTick >= firstTick else { return [] }
        let n = lastTick - firstTick + 1

        // Per-stroke precomputation.
        let count = strokes.count
        var fullX = [Double](repeating: 0, count: count)
        var fullY = [Double](repeating: 0, count: count)
        var activeEnd = [Double](repeating: 0, count: count)
        var activeStart = [Double](repeating: 0, count: count)
        // Arc constants: displacement = k · (sin φ − sin θs, cos θs − cos φ), or a straight line.
        var arcK = [Double](repeating: 0, count: count)
        var sinStart = [Double](repeating: 0, count: count)
        var cosStart = [Double](repeating: 0, count: count)
        for i in 0..<count {
            let d = strokes[i].displacement(fraction: 1)
            fullX[i] = d.x
            fullY[i] = d.y
            activeEnd[i] = strokes[i].time(atQuantile: 3.5)
            activeStart[i] = strokes[i].time(atQuantile: -3.5)
            let turn = strokes[i].thetaEnd - strokes[i].thetaStart
            sinStart[i] = _sin(strokes[i].thetaStart)
            cosStart[i] = _cos(strokes[i].thetaStart)
            arcK[i] = abs(turn) < 1e-6 ? 0 : strokes[i].amplitude / turn
        }
        var retired = [Bool](repeating: false, count: count)

        var samples: [PenSample] = []
        samples.reserveCapacity(n)
        var baseX = 0.0, baseY = 0.0
        var low = 0
        var liftIndex = 0
        var minX = Double.infinity, maxX = -Double.infinity, minY = Double.infinity, maxY = -Double.infinity
        var prevX = 0.0, prevY = 0.0
        var heldPressure = 0.0
        var heldSlot = -1
        let invSqrt2 = 0.7071067811865476
        let pressureRamp = 0.045
        for k in 0..<n {
            let t = Double(firstTick + k) / rate
            var x = baseX, y = baseY
            var j = low
            while j < count {
                let s = strokes[j]
                if s.startTime >= t { break }
                if !retired[j] && t > activeStart[j] {
                    if t >= activeEnd[j] {
                        retired[j] = true
                        baseX += fullX[j]
                        baseY += fullY[j]
                        x += fullX[j]
                        y += fullY[j]
                    } else {
                        let f = 0.5 + 0.5 * FastMath.erf((FastMath.log(t - s.startTime) - s.mu) / s.sigma * invSqrt2)
                        let k = arcK[j]
                        if k == 0 {
                            x += s.amplitude * f * cosStart[j]
                            y += s.amplitude * f * sinStart[j]
                        } else {
                            let phi = FastMath.sinCos(s.thetaStart + (s.thetaEnd - s.thetaStart) * f)
                            x += k * (phi.sin - sinStart[j])
                            y += k * (cosStart[j] - phi.cos)
                        }
                    }
                }
                j += 1
            }
            while low < count && retired[low] { low += 1 }

            // Pen state.
            while liftIndex < lifts.count && lifts[liftIndex].1 < t { liftIndex += 1 }
            var down = true
            var runStart = tStart
            var runEnd = tEnd
            if liftIndex < lifts.count {
                let lift = lifts[liftIndex]
                if t >= lift.0 { down = false } else { runEnd = lift.0 }
            }
            if liftIndex > 0 { runStart = max(runStart, lifts[liftIndex - 1].1) }

            let speed = k == 0 ? 0 : ((x - prevX) * (x - prevX) + (y - prevY) * (y - prevY)).squareRoot() * rate
            prevX = x
            prevY = y
            guard down || pen.reportsHover else { continue }

            var pressure = 0.0
            if down && pen.reportsPressure {
                let ramp = min(1, min(t - runStart, runEnd - t) / pressureRamp)
                var p = signer.basePressure * (1.15 - 0.45 * min(speed / 220, 1)) * (0.3 + 0.7 * max(ramp, 0))
                p = min(max(p, 0.02), 1)
                if let pressureRate = pen.pressureRate {
                    let slot = Int(t * Double(pressureRate))
                    if slot != heldSlot {
                        heldSlot = slot
                        heldPressure = p
                    }
                    p = heldPressure
                }
                let levels = Double(pen.pressureLevels - 1)
                pressure = Double(roundToInt(p * levels)) / levels
            }
            if down {
                minX = min(minX, x); maxX = max(maxX, x)
                minY = min(minY, y); maxY = max(maxY, y)
            }
            var altitude = 0.0, azimuth = 0.0
            if pen.reportsTilt {
                altitude = signer.altitude + 0.06 * FastMath.sinCos(3.7 * t + 1.3).sin
                azimuth = signer.azimuth + 0.1 * FastMath.sinCos(2.5 * t + 0.4).sin
            }
            samples.append(PenSample(x: x, y: y, pressure: pressure, tick: UInt32(firstTick + k),
                                     isDown: down, altitude: altitude, azimuth: azimuth))
        }
        guard minX <= maxX else { return [] }

        // Place on screen: centre the pen-down box on the aim point, apply slant, scale and rotation, flip y.
        let midX = (minX + maxX) / 2, midY = (minY + maxY) / 2
        let c = _cos(placement.rotation) * placement.scale
        let s = _sin(placement.rotation) * placement.scale
        let shear = _sin(signer.slant) * 0.35
        let q = pen.positionQuantum
        let inverseQ = 1 / q
        let tickBase = samples.first.map { $0.tick } ?? 0
        var out = 0
        for i in samples.indices {
            var sample = samples[i]
            let mx = (sample.x - midX) * signer.stretch + shear * (sample.y - midY)
            let my = sample.y - midY
            let sx = placement.centerX + c * mx - s * my
            let sy = placement.centerY - (s * mx + c * my)
            // Samples beyond the screen are never reported.
            guard sx >= 0, sy >= 0, sx <= screen.width, sy <= screen.height else { continue }
            sample.x = Double(roundToInt(sx * inverseQ)) * q
            sample.y = Double(roundToInt(sy * inverseQ)) * q
            sample.tick -= tickBase
            samples[out] = sample
            out += 1
        }
        samples.removeLast(samples.count - out)
        return samples
    }
}
