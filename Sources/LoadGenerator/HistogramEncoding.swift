import CZlib
import Foundation
import Histogram

/// HdrHistogram's standard V2 serialisation (the one Java, C, Go and Python HdrHistogram read):
/// a 40-byte big-endian header, then the counts array as ZigZag LEB128 with runs of zeros
/// written as negative lengths; the compressed form wraps it in zlib. hdrhistogram-swift has no
/// serialisation of its own, so this writes the format from the recorded values.
public enum HistogramEncoding {
    static let encodingCookie: UInt32 = 0x1C84_9303 | 0x10
    static let compressedCookie: UInt32 = 0x1C84_9304 | 0x10

    public struct Error: Swift.Error, CustomStringConvertible {
        public var description: String
    }

    /// The uncompressed V2 encoding.
    public static func encode(_ histogram: Histogram<UInt64>) -> [UInt8] {
        let layout = Layout(lowestDiscernibleValue: histogram.lowestDiscernibleValue,
                            digits: Int(histogram.numberOfSignificantValueDigits.rawValue))
        // Counts by index up to the highest recorded one (the payload stops there).
        var counts: [Int: UInt64] = [:]
        var limit = 0
        for value in histogram.recordedValues() {
            let index = layout.countsIndex(for: value.value)
            counts[index, default: 0] += UInt64(value.count)
            limit = max(limit, index + 1)
        }
        var payload: [UInt8] = []
        var index = 0
        while index < limit {
            let count = counts[index] ?? 0
            index += 1
            if count == 0 {
                var zeros: Int64 = 1
                while index < limit, counts[index] == nil {
                    zeros += 1
                    index += 1
                }
                appendZigZag(zeros > 1 ? -zeros : 0, to: &payload)
            } else {
                appendZigZag(Int64(clamping: count), to: &payload)
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(40 + payload.count)
        append(encodingCookie, to: &bytes)
        append(UInt32(payload.count), to: &bytes)
        append(UInt32(0), to: &bytes)  // normalizing index offset
        append(UInt32(histogram.numberOfSignificantValueDigits.rawValue), to: &bytes)
        append(histogram.lowestDiscernibleValue, to: &bytes)
        append(max(histogram.highestTrackableValue, 2 * histogram.lowestDiscernibleValue), to: &bytes)
        append((1.0).bitPattern, to: &bytes)  // integer-to-double conversion ratio
        bytes += payload
        return bytes
    }

    /// The compressed V2 encoding (cookie, length, zlib stream), as interval logs carry it.
    public static func encodeCompressed(_ histogram: Histogram<UInt64>) throws(Error) -> [UInt8] {
        let plain = encode(histogram)
        var capacity = compressBound(uLong(plain.count))
        var compressed = [UInt8](repeating: 0, count: Int(capacity))
        let status = compressed.withUnsafeMutableBufferPointer { out in
            plain.withUnsafeBufferPointer { input in
                compress2(out.baseAddress, &capacity, input.baseAddress, uLong(input.count), Z_DEFAULT_COMPRESSION)
            }
        }
        guard status == Z_OK else { throw Error(description: "zlib compress2 failed with status \(status)") }
        var bytes: [UInt8] = []
        append(compressedCookie, to: &bytes)
        append(UInt32(capacity), to: &bytes)
        bytes += compressed.prefix(Int(capacity))
        return bytes
    }

    /// The counts of an uncompressed V2 encoding, by value (the lowest value of each bucket).
    /// Bounded: refuses a payload longer than the input or a zero run past `maxIndex`.
    public static func decodeCounts(_ bytes: [UInt8], maxIndex: Int = 1 << 24) throws(Error) -> (digits: Int, counts: [UInt64: UInt64]) {
        guard bytes.count >= 40, readUInt32(bytes, 0) == encodingCookie else {
            throw Error(description: "not an HdrHistogram V2 encoding (bad cookie or shorter than its 40-byte header)")
        }
        let length = Int(readUInt32(bytes, 4))
        guard 40 + length <= bytes.count else { throw Error(description: "payload length \(length) runs past the end of the input") }
        let digits = Int(readUInt32(bytes, 12))
        let lowest = readUInt64(bytes, 16)
        guard (0...5).contains(digits), lowest >= 1, lowest < 1 << 40 else { throw Error(description: "bad header: \(digits) digits, lowest \(lowest)") }
        let layout = Layout(lowestDiscernibleValue: lowest, digits: digits)
        var counts: [UInt64: UInt64] = [:]
        var position = 40
        var index = 0
        while position < 40 + length {
            var raw: UInt64 = 0
            var shift: UInt64 = 0
            var byteCount = 0
            while true {
                guard position < 40 + length else { throw Error(description: "truncated LEB128 value") }
                let byte = bytes[position]
                position += 1
                byteCount += 1
                if byteCount == 9 {
                    raw |= UInt64(byte) << 56
                    break
                }
                raw |= UInt64(byte & 0x7F) << shift
                shift += 7
                if byte & 0x80 == 0 { break }
            }
            let value = Int64(bitPattern: (raw >> 1) ^ (0 &- (raw & 1)))
            // A zero run (negative) of any length, or a count up to Int64.max: checked before
            // any arithmetic, so a hostile file cannot overflow the index or a count.
            let step = value < 0 ? value.magnitude : 1
            guard step <= UInt64(max(0, maxIndex - index)) else {
                throw Error(description: "counts index \(index) + \(step) beyond the limit \(maxIndex)")
            }
            if value > 0 {
                let bucket = layout.value(atIndex: index)
                let (sum, overflow) = counts[bucket, default: 0].addingReportingOverflow(UInt64(value))
                guard !overflow else { throw Error(description: "the count of value \(bucket) overflows 64 bits") }
                counts[bucket] = sum
            }
            index += Int(step)
        }
        return (digits, counts)
    }

    /// Inflates a compressed V2 encoding into the uncompressed one (at most `maxSize` bytes).
    public static func decompress(_ bytes: [UInt8], maxSize: Int = 1 << 22) throws(Error) -> [UInt8] {
        guard bytes.count >= 8, readUInt32(bytes, 0) == compressedCookie else {
            throw Error(description: "not a compressed HdrHistogram V2 encoding (bad cookie)")
        }
        let length = Int(readUInt32(bytes, 4))
        guard 8 + length <= bytes.count else { throw Error(description: "compressed length \(length) runs past the end of the input") }
        var size = uLong(maxSize)
        var out = [UInt8](repeating: 0, count: maxSize)
        let status = out.withUnsafeMutableBufferPointer { buffer in
            Array(bytes[8..<(8 + length)]).withUnsafeBufferPointer { input in
                uncompress(buffer.baseAddress, &size, input.baseAddress, uLong(input.count))
            }
        }
        guard status == Z_OK else { throw Error(description: "zlib uncompress failed with status \(status)") }
        return Array(out.prefix(Int(size)))
    }

    /// The counts-array layout of HdrHistogram (the same arithmetic as every implementation).
    struct Layout {
        let unitMagnitude: Int
        let subBucketHalfCountMagnitude: Int
        let subBucketHalfCount: Int
        let subBucketMask: UInt64
        let leadingZeroCountBase: Int

        init(lowestDiscernibleValue: UInt64, digits: Int) {
            unitMagnitude = 63 - lowestDiscernibleValue.leadingZeroBitCount
            var largest: UInt64 = 2
            for _ in 0..<digits { largest *= 10 }
            // ceil(log2(largest))
            let subBucketCountMagnitude = 64 - (largest - 1).leadingZeroBitCount
            subBucketHalfCountMagnitude = max(subBucketCountMagnitude, 1) - 1
            subBucketHalfCount = 1 << subBucketHalfCountMagnitude
            subBucketMask = UInt64((1 << subBucketCountMagnitude) - 1) << unitMagnitude
            leadingZeroCountBase = 64 - unitMagnitude - subBucketCountMagnitude
        }

        func countsIndex(for value: UInt64) -> Int {
            let bucketIndex = leadingZeroCountBase - (value | subBucketMask).leadingZeroBitCount
            let subBucketIndex = Int(value >> UInt64(bucketIndex + unitMagnitude))
            return ((bucketIndex + 1) << subBucketHalfCountMagnitude) + subBucketIndex - subBucketHalfCount
        }

        func value(atIndex index: Int) -> UInt64 {
            var bucketIndex = (index >> subBucketHalfCountMagnitude) - 1
            var subBucketIndex = (index & (subBucketHalfCount - 1)) + subBucketHalfCount
            if bucketIndex < 0 {
                subBucketIndex -= subBucketHalfCount
                bucketIndex = 0
            }
            return UInt64(subBucketIndex) << UInt64(bucketIndex + unitMagnitude)
        }
    }

    static func appendZigZag(_ value: Int64, to bytes: inout [UInt8]) {
        var v = UInt64(bitPattern: (value << 1) ^ (value >> 63))
        for _ in 0..<8 {
            if v >> 7 == 0 {
                bytes.append(UInt8(v))
                return
            }
            bytes.append(UInt8(v & 0x7F) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(truncatingIfNeeded: v))
    }

    static func append<T: FixedWidthInteger>(_ value: T, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.bigEndian) { bytes += $0 }
    }

    static func readUInt32(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
        bytes[offset..<(offset + 4)].reduce(0) { $0 << 8 | UInt32($1) }
    }

    static func readUInt64(_ bytes: [UInt8], _ offset: Int) -> UInt64 {
        bytes[offset..<(offset + 8)].reduce(0) { $0 << 8 | UInt64($1) }
    }
}
