// Fast, deterministic elementary functions for the synthesis hot path. Accuracy (checked by tests
// against libm) is far below the 0.01 mm position quantum: relative error < 1e-9 for exp, log,
// sin and cos on the ranges used, absolute error < 2e-7 for erf.

enum FastMath {
    private static let ln2Hi = 6.93147180369123816490e-01
    private static let ln2Lo = 1.90821492927058770002e-10
    private static let invLn2 = 1.44269504088896338700e+00
    private static let piOver2Hi = 1.5707963267341256
    private static let piOver2Lo = 6.077100506506192e-11
    private static let twoOverPi = 0.6366197723675814

    /// e^x for |x| < 700.
    @inline(__always) static func exp(_ x: Double) -> Double {
        let clamped = min(max(x, -700), 700)
        let n = roundToInt(clamped * invLn2)
        let nd = Double(n)
        let r = (clamped - nd * ln2Hi) - nd * ln2Lo
        // Taylor series to r^11 on |r| <= 0.347.
        var p = 1.0 / 39_916_800
        p = p * r + 1.0 / 3_628_800
        p = p * r + 1.0 / 362_880
        p = p * r + 1.0 / 40_320
        p = p * r + 1.0 / 5_040
        p = p * r + 1.0 / 720
        p = p * r + 1.0 / 120
        p = p * r + 1.0 / 24
        p = p * r + 1.0 / 6
        p = p * r + 0.5
        p = p * r + 1
        p = p * r + 1
        return p * Double(bitPattern: UInt64(n + 1023) << 52)
    }

    /// Natural logarithm for finite x > 0 (normal numbers).
    @inline(__always) static func log(_ x: Double) -> Double {
        let bits = x.bitPattern
        var e = Int((bits >> 52) & 0x7FF) - 1023
        var m = Double(bitPattern: (bits & 0x000F_FFFF_FFFF_FFFF) | 0x3FF0_0000_0000_0000)
        if m > 1.4142135623730951 {
            m *= 0.5
            e += 1
        }
        let s = (m - 1) / (m + 1)
        let s2 = s * s
        // 2 atanh(s) = 2(s + s^3/3 + … + s^15/15), |s| <= 0.1716.
        var p = 1.0 / 15
        p = p * s2 + 1.0 / 13
        p = p * s2 + 1.0 / 11
        p = p * s2 + 1.0 / 9
        p = p * s2 + 1.0 / 7
        p = p * s2 + 1.0 / 5
        p = p * s2 + 1.0 / 3
        p = p * s2 + 1
        let ed = Double(e)
        return ed * ln2Hi + (2 * s * p + ed * ln2Lo)
    }

    /// sin and cos of x for |x| < 1e6.
    @inline(__always) static func sinCos(_ x: Double) -> (sin: Double, cos: Double) {
        let k = roundToInt(x * twoOverPi)
        let kd = Double(k)
        let r = (x - kd * piOver2Hi) - kd * piOver2Lo
        let r2 = r * r
        var s = -1.0 / 1_307_674_368_000
        s = s * r2 + 1.0 / 6_227_020_800
        s = s * r2 - 1.0 / 39_916_800
        s = s * r2 + 1.0 / 362_880
        s = s * r2 - 1.0 / 5_040
        s = s * r2 + 1.0 / 120
        s = s * r2 - 1.0 / 6
        s = r + r * r2 * s
        var c = 1.0 / 20_922_789_888_000
        c = c * r2 - 1.0 / 87_178_291_200
        c = c * r2 + 1.0 / 479_001_600
        c = c * r2 - 1.0 / 3_628_800
        c = c * r2 + 1.0 / 40_320
        c = c * r2 - 1.0 / 720
        c = c * r2 + 1.0 / 24
        c = c * r2 - 0.5
        c = 1 + r2 * c
        switch k & 3 {
        case 0: return (s, c)
        case 1: return (c, -s)
        case 2: return (-s, -c)
        default: return (-c, s)
        }
    }

    /// The error function, Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7).
    @inline(__always) static func erf(_ x: Double) -> Double {
        let a = abs(x)
        let t = 1 / (1 + 0.3275911 * a)
        var p = 1.061405429
        p = p * t - 1.453152027
        p = p * t + 1.421413741
        p = p * t - 0.284496736
        p = p * t + 0.254829592
        let y = 1 - p * t * exp(-a * a)
        return x < 0 ? -y : y
    }
}
