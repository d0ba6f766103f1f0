/// Writes bytes into a buffer sized in advance, without per-byte capacity checks.
/// Callers guarantee the capacity (every use computes a strict upper bound first).
struct FastWriter {
    let base: UnsafeMutablePointer<UInt8>
    let capacity: Int
    var count = 0

    @inline(__always) mutating func byte(_ b: UInt8) {
        base[count] = b
        count += 1
    }

    @inline(__always) mutating func ascii(_ s: StaticString) {
        let n = s.utf8CodeUnitCount
        (base + count).update(from: s.utf8Start, count: n)
        count += n
    }

    @inline(__always) mutating func bytes(_ b: [UInt8]) {
        b.withUnsafeBufferPointer { src in
            if let address = src.baseAddress { (base + count).update(from: address, count: src.count) }
        }
        count += b.count
    }

    @inline(__always) mutating func uint16(_ v: UInt16) {
        base[count] = UInt8(truncatingIfNeeded: v >> 8)
        base[count + 1] = UInt8(truncatingIfNeeded: v)
        count += 2
    }

    /// A non-negative integer below 10^9 in decimal.
    @inline(__always) mutating func decimal(_ value: Int) {
        var digits = 1
        var limit = 10
        while value >= limit && digits < 9 {
            digits += 1
            limit &*= 10
        }
        var v = value
        var i = count + digits - 1
        while i >= count {
            base[i] = 0x30 &+ UInt8(truncatingIfNeeded: v % 10)
            v /= 10
            i -= 1
        }
        count += digits
    }

    /// `v` with exactly two decimals (|v| < 10^7).
    @inline(__always) mutating func fixed2(_ v: Double) {
        var n = roundToInt(v * 100)
        if n < 0 {
            byte(0x2D)
            n = -n
        }
        decimal(n / 100)
        let frac = n % 100
        base[count] = 0x2E
        base[count + 1] = 0x30 &+ UInt8(truncatingIfNeeded: frac / 10)
        base[count + 2] = 0x30 &+ UInt8(truncatingIfNeeded: frac % 10)
        count += 3
    }
}

/// Rounds half away from zero to an integer without a libm call. `v` must be finite and well inside Int's range.
@inline(__always) func roundToInt(_ v: Double) -> Int {
    Int(v >= 0 ? v + 0.5 : v - 0.5)
}

extension Array where Element == UInt8 {
    /// Builds an array of at most `capacity` bytes with a ``FastWriter``.
    @inline(__always) static func writing(capacity: Int, _ body: (inout FastWriter) throws -> Void) rethrows -> [UInt8] {
        try [UInt8](unsafeUninitializedCapacity: capacity) { buffer, initialized in
            guard let base = buffer.baseAddress else {
                initialized = 0
                return
            }
            var writer = FastWriter(base: base, capacity: capacity)
            try body(&writer)
            initialized = writer.count
        }
    }
}
