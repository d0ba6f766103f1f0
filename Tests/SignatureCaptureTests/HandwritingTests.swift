import FleetTesting
import Testing
@testable import SignatureCapture

@Suite struct HandwritingTests {
    @Test func strokeHasClosedFormArc() {
        let s = SigmaLognormalStroke(amplitude: 10, startTime: 0, mu: -1.5, sigma: 0.25, thetaStart: 0, thetaEnd: Double.pi)
        let end = s.displacement(fraction: 1)
        // A half-turn arc of length 10 has diameter 20/π, ending straight "up".
        #expect(abs(end.x) < 1e-9)
        #expect(abs(end.y - 20 / Double.pi) < 1e-9)
        #expect(abs(s.progress(at: 0.2231301601484298) - 0.5) < 1e-9, "median at t0 + e^μ")
        #expect(s.progress(at: -1) == 0)
        #expect(s.speed(at: 0.22) > s.speed(at: 0.6))
    }

    @Test func sameSeedGivesByteIdenticalOutput() throws {
        let seed = testSeed("sameSeedGivesByteIdenticalOutput")
        for pen in PenKind.allKinds {
            let a = try sampleCapture(pen: pen, signer: seed, signing: 3)
            let b = try sampleCapture(pen: pen, signer: seed, signing: 3)
            #expect(a.isoRecord == b.isoRecord)
            #expect(a.svgBytes() == b.svgBytes())
            let pngA = try a.png(), pngB = try b.png()
            #expect(pngA == pngB)
            let c = try sampleCapture(pen: pen, signer: seed, signing: 4)
            #expect(a.isoRecord != c.isoRecord, "another signing varies")
        }
        #expect(SignerProfile(seed: seed) == SignerProfile(seed: seed))
    }

    /// Pen-down trajectory resampled to `n` points by arc length, centred and scaled to unit RMS radius.
    func normalisedPath(_ signature: CapturedSignature, n: Int = 64) -> [(Double, Double)] {
        let points = signature.samples.filter(\.isDown).map { ($0.x, $0.y) }
        var cumulative = [0.0]
        for i in 1..<points.count {
            cumulative.append(cumulative[i - 1] + ((points[i].0 - points[i - 1].0) * (points[i].0 - points[i - 1].0) + (points[i].1 - points[i - 1].1) * (points[i].1 - points[i - 1].1)).squareRoot())
        }
        let total = cumulative.last ?? 1
        var out: [(Double, Double)] = []
        var j = 0
        for k in 0..<n {
            let target = total * Double(k) / Double(n - 1)
            while j < points.count - 2 && cumulative[j + 1] < target { j += 1 }
            let span = max(cumulative[j + 1] - cumulative[j], 1e-12)
            let f = min(max((target - cumulative[j]) / span, 0), 1)
            out.append((points[j].0 + f * (points[j + 1].0 - points[j].0), points[j].1 + f * (points[j + 1].1 - points[j].1)))
        }
        let cx = out.map(\.0).reduce(0, +) / Double(n), cy = out.map(\.1).reduce(0, +) / Double(n)
        let rms = (out.map { ($0.0 - cx) * ($0.0 - cx) + ($0.1 - cy) * ($0.1 - cy) }.reduce(0, +) / Double(n)).squareRoot()
        return out.map { (($0.0 - cx) / rms, ($0.1 - cy) / rms) }
    }

    func dtw(_ a: [(Double, Double)], _ b: [(Double, Double)]) -> Double {
        let n = a.count, m = b.count
        var previous = [Double](repeating: .infinity, count: m + 1)
        var current = previous
        previous[0] = 0
        for i in 1...n {
            current[0] = .infinity
            for j in 1...m {
                let dx = a[i - 1].0 - b[j - 1].0, dy = a[i - 1].1 - b[j - 1].1
                current[j] = (dx * dx + dy * dy).squareRoot() + min(previous[j], current[j - 1], previous[j - 1])
            }
            swap(&previous, &current)
        }
        return previous[m] / Double(n + m)
    }

    @Test func signingsOfOneSignerAreCloserThanOtherSigners() throws {
        let seed = testSeed("signingsOfOneSignerAreCloserThanOtherSigners")
        let signers = 50, signings = 3
        let capturer = SignatureCapturer(configuration: CaptureConfiguration(reportsPointHistory: false),
                                         availability: PenAvailability(connected: [.applePencil]))
        var paths: [[[(Double, Double)]]] = []
        for s in 0..<signers {
            let signer = SignerProfile(seed: seed &+ UInt64(s) &* 7919)
            paths.append(try (1...signings).map { normalisedPath(try capturer.capture(signer: signer, signing: $0, fieldID: "f")) })
        }
        var withinAll: [Double] = [], betweenAll: [Double] = []
        var signersCloserToThemselves = 0
        for s in 0..<signers {
            var within: [Double] = []
            for i in 0..<signings { for j in (i + 1)..<signings { within.append(dtw(paths[s][i], paths[s][j])) } }
            var between: [Double] = []
            for o in 0..<signers where o != s { between.append(dtw(paths[s][0], paths[o][0])) }
            let w = within.reduce(0, +) / Double(within.count)
            if w < between.min() ?? 0 { signersCloserToThemselves += 1 }
            withinAll.append(w)
            betweenAll.append(between.reduce(0, +) / Double(between.count))
        }
        let meanWithin = withinAll.reduce(0, +) / Double(signers)
        let meanBetween = betweenAll.reduce(0, +) / Double(signers)
        print("DTW mean within \(meanWithin), between \(meanBetween); \(signersCloserToThemselves)/\(signers) signers closer to themselves than to anyone else (seed \(seed))")
        #expect(meanWithin * 2 < meanBetween, "seed \(seed)")
        #expect(signersCloserToThemselves >= signers * 9 / 10, "seed \(seed)")
    }
}

@Suite struct FastMathTests {
    @Test func fastFunctionsMatchLibm() {
        var random = SeededRandom(seed: testSeed("fastFunctionsMatchLibm"))
        for _ in 0..<20_000 {
            let x = random.uniform(-40...40)
            let e = FastMath.exp(x), reference = _exp(x)
            #expect(abs(e - reference) <= 1e-9 * reference, "exp(\(x))")
            let positive = _exp(random.uniform(-30...5))
            #expect(abs(FastMath.log(positive) - _log(positive)) <= 1e-9 * max(1, abs(_log(positive))), "log(\(positive))")
            let angle = random.uniform(-30...30)
            let sc = FastMath.sinCos(angle)
            #expect(abs(sc.sin - _sin(angle)) < 1e-9 && abs(sc.cos - _cos(angle)) < 1e-9, "sincos(\(angle))")
            let z = random.uniform(-6...6)
            #expect(abs(FastMath.erf(z) - _erf(z)) < 2e-7, "erf(\(z))")
        }
    }
}
