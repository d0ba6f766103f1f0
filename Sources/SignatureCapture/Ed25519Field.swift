/// Arithmetic modulo p = 2^255 − 19, just enough to tell whether 32 bytes encode a point of the
/// Ed25519 curve (RFC 8032 §5.1.3, decoding). Only public keys at enrollment go through it, so it
/// is written to be read, not to be fast or constant-time (a public key is no secret).
struct Ed25519Field: Equatable {
    /// Four 64-bit limbs, least significant first, always below p.
    private(set) var limbs: [UInt64]

    static let zero = Ed25519Field(reduced: [0, 0, 0, 0])
    static let one = Ed25519Field(reduced: [1, 0, 0, 0])
    /// d = −121665 / 121666 mod p, the curve's constant.
    static let d = Ed25519Field(reduced: [0x75eb_4dca_1359_78a3, 0x0070_0a4d_4141_d8ab, 0x8cc7_4079_7779_e898, 0x5203_6cee_2b6f_fe73])
    private static let p: [UInt64] = [0xffff_ffff_ffff_ffed, 0xffff_ffff_ffff_ffff, 0xffff_ffff_ffff_ffff, 0x7fff_ffff_ffff_ffff]

    private init(reduced limbs: [UInt64]) {
        self.limbs = limbs
    }

    /// The number of 32 little-endian bytes, bit 255 ignored; nil when it is p or more.
    init?(canonical bytes: [UInt8]) {
        guard bytes.count == 32 else { return nil }
        var limbs = [UInt64](repeating: 0, count: 4)
        for index in 0..<32 { limbs[index / 8] |= UInt64(bytes[index]) << (8 * UInt64(index % 8)) }
        limbs[3] &= 0x7fff_ffff_ffff_ffff
        guard Self.lessThanP(limbs) else { return nil }
        self.limbs = limbs
    }

    static func + (a: Ed25519Field, b: Ed25519Field) -> Ed25519Field {
        var sum = [UInt64](repeating: 0, count: 5)
        var carry: UInt64 = 0
        for index in 0..<4 {
            let (s1, o1) = a.limbs[index].addingReportingOverflow(b.limbs[index])
            let (s2, o2) = s1.addingReportingOverflow(carry)
            sum[index] = s2
            carry = (o1 ? 1 : 0) + (o2 ? 1 : 0)
        }
        sum[4] = carry
        return Ed25519Field(reduced: reduce(sum))
    }

    static prefix func - (a: Ed25519Field) -> Ed25519Field {
        a == .zero ? .zero : Ed25519Field(reduced: subtract(p, a.limbs))
    }

    static func - (a: Ed25519Field, b: Ed25519Field) -> Ed25519Field { a + (-b) }

    static func * (a: Ed25519Field, b: Ed25519Field) -> Ed25519Field {
        // Schoolbook product into eight limbs; each row's carry fits in 64 bits, since
        // t + lo + carry + hi·2^64 ≤ (2^64 − 1) + (2^64 − 1)^2 + (2^64 − 1) < 2^128.
        var product = [UInt64](repeating: 0, count: 8)
        for i in 0..<4 {
            var carry: UInt64 = 0
            for j in 0..<4 {
                let (high, low) = a.limbs[i].multipliedFullWidth(by: b.limbs[j])
                let (s1, o1) = product[i + j].addingReportingOverflow(low)
                let (s2, o2) = s1.addingReportingOverflow(carry)
                product[i + j] = s2
                carry = high &+ (o1 ? 1 : 0) &+ (o2 ? 1 : 0)
            }
            product[i + 4] = carry
        }
        return Ed25519Field(reduced: reduce(product))
    }

    /// `self` to the power `exponent` (little-endian limbs), by square and multiply.
    func power(_ exponent: [UInt64]) -> Ed25519Field {
        var result = Ed25519Field.one
        for limb in exponent.reversed() {
            for bit in stride(from: 63, through: 0, by: -1) {
                result = result * result
                if (limb >> UInt64(bit)) & 1 == 1 { result = result * self }
            }
        }
        return result
    }

    /// Whether 32 bytes are the encoding of a point on the curve −x² + y² = 1 + d·x²·y²: whether
    /// x² = (y² − 1) / (d·y² + 1) has a root, found as RFC 8032 §5.1.3 finds it. A y of p or more
    /// is not (the caller refuses it as non-canonical first).
    static func isCurvePoint(_ encoding: [UInt8]) -> Bool {
        guard let y = Ed25519Field(canonical: encoding) else { return false }
        let ySquared = y * y
        let u = ySquared - .one
        let v = d * ySquared + .one
        let v3 = v * v * v
        let v7 = v3 * v3 * v
        // (p − 5) / 8 = 2^252 − 3.
        let x = u * v3 * (u * v7).power([0xffff_ffff_ffff_fffd, 0xffff_ffff_ffff_ffff, 0xffff_ffff_ffff_ffff, 0x0fff_ffff_ffff_ffff])
        let check = v * x * x
        // v·x² = u: x is a root; v·x² = −u: x·√−1 is; anything else: no root, no point.
        return check == u || check == -u
    }

    /// A number of up to 2^320 (five or eight limbs) brought below p: the bits from 255 up are
    /// worth 19 each (2^255 ≡ 19), folded in until nothing is left above bit 254.
    private static func reduce(_ input: [UInt64]) -> [UInt64] {
        var limbs = input
        while limbs.count > 4 || limbs[3] >> 63 != 0 {
            // high = the number >> 255 (limb k holds bits 255 + 64k …); the rest stays.
            let highCount = limbs.count - 3
            var high = [UInt64](repeating: 0, count: highCount)
            for k in 0..<highCount {
                let index = k + 3
                high[k] = limbs[index] >> 63 | (index + 1 < limbs.count ? limbs[index + 1] << 1 : 0)
            }
            var folded = Array(limbs[0..<4])
            folded[3] &= 0x7fff_ffff_ffff_ffff
            while folded.count < highCount { folded.append(0) }
            // folded += 19 · high
            var carry: UInt64 = 0
            for k in 0..<folded.count {
                let (productHigh, productLow) = (k < highCount ? high[k] : 0).multipliedFullWidth(by: 19)
                let (s1, o1) = folded[k].addingReportingOverflow(productLow)
                let (s2, o2) = s1.addingReportingOverflow(carry)
                folded[k] = s2
                carry = productHigh &+ (o1 ? 1 : 0) &+ (o2 ? 1 : 0)
            }
            if carry != 0 { folded.append(carry) }
            while folded.count > 4, folded.last == 0 { folded.removeLast() }
            limbs = folded
        }
        return lessThanP(limbs) ? limbs : subtract(limbs, p)
    }

    private static func lessThanP(_ limbs: [UInt64]) -> Bool {
        for index in stride(from: 3, through: 0, by: -1) where limbs[index] != p[index] {
            return limbs[index] < p[index]
        }
        return false
    }

    /// a − b for a ≥ b, four limbs.
    private static func subtract(_ a: [UInt64], _ b: [UInt64]) -> [UInt64] {
        var difference = [UInt64](repeating: 0, count: 4)
        var borrow: UInt64 = 0
        for index in 0..<4 {
            let (d1, o1) = a[index].subtractingReportingOverflow(b[index])
            let (d2, o2) = d1.subtractingReportingOverflow(borrow)
            difference[index] = d2
            borrow = (o1 ? 1 : 0) + (o2 ? 1 : 0)
        }
        return difference
    }
}
