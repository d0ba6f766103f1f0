import Foundation
import Histogram
import Testing

@testable import LoadGenerator

@Suite struct HistogramEncodingTests {
    static let values: [(UInt64, UInt64)] = [(1, 1), (1000, 2), (2047, 1), (5000, 4), (123_456, 3), (98_765_432, 1)]

    func sample(highest: UInt64? = nil) -> Histogram<UInt64> {
        var histogram = highest.map { Histogram<UInt64>(lowestDiscernibleValue: 1, highestTrackableValue: $0, numberOfSignificantValueDigits: .three) }
            ?? makeLatencyHistogram()
        for (value, count) in Self.values { histogram.record(value, count: count) }
        return histogram
    }

    /// Written by the Python `hdrhistogram` package (0.10.8) for the same values in a histogram
    /// of 1…3,600,000,000 with 3 digits: an independent implementation of the format.
    static let pythonEncoded = "HISTFAAAADJ4nJNpmSzMwMAgxAABzFCaEURcm7yEwf4DVIDpND/LagGmw8Icp73YNs5kZAIA0fMJfQ=="

    @Test func encodingAgreesWithAnotherImplementation() throws {
        let reference = try HistogramEncoding.decompress(Array(try #require(Data(base64Encoded: Self.pythonEncoded))))
        let ours = HistogramEncoding.encode(sample(highest: 3_600_000_000))
        // Same header (cookie, length, digits, range, ratio) and the same counts; the payloads
        // differ only in how a lone empty bucket is written (Java's 0, Python's run of −1).
        #expect(Array(ours.prefix(40)) == Array(reference.prefix(40)))
        #expect(Array(ours.dropFirst(41)) == Array(reference.dropFirst(41)))
        #expect(try HistogramEncoding.decodeCounts(ours).counts == HistogramEncoding.decodeCounts(reference).counts)
    }

    @Test func compressedEncodingRoundTrips() throws {
        let histogram = sample()
        let compressed = try HistogramEncoding.encodeCompressed(histogram)
        #expect(Array(compressed.prefix(4)) == [0x1C, 0x84, 0x93, 0x14])
        let decoded = try HistogramEncoding.decodeCounts(try HistogramEncoding.decompress(compressed))
        #expect(decoded.digits == 3)
        #expect(decoded.counts.values.reduce(0, +) == histogram.totalCount)
        for (value, count) in Self.values {
            #expect(decoded.counts[histogram.lowestEquivalentForValue(value)] == count, "value \(value)")
        }
        // The Python-written one decodes to the same counts.
        let python = try HistogramEncoding.decodeCounts(
            try HistogramEncoding.decompress(Array(try #require(Data(base64Encoded: Self.pythonEncoded)))))
        #expect(python.counts == decoded.counts)
    }

    @Test func zigZagMatchesTheReferenceVectors() {
        func bytes(_ value: Int64) -> [UInt8] {
            var out: [UInt8] = []
            HistogramEncoding.appendZigZag(value, to: &out)
            return out
        }
        #expect(bytes(0) == [0])
        #expect(bytes(-1) == [1])
        #expect(bytes(1) == [2])
        #expect(bytes(64) == [0x80, 0x01])
        #expect(bytes(-3) == [5])
        #expect(bytes(Int64.max).count == 9)
    }

    @Test func truncatedOrForeignInputIsRefused() throws {
        let plain = HistogramEncoding.encode(sample())
        #expect(throws: HistogramEncoding.Error.self) { try HistogramEncoding.decodeCounts(Array(plain.prefix(30))) }
        #expect(throws: HistogramEncoding.Error.self) { try HistogramEncoding.decodeCounts(Array(plain.dropLast(2))) }
        #expect(throws: HistogramEncoding.Error.self) { try HistogramEncoding.decompress(Array("not a histogram".utf8)) }
    }

    /// A hostile `.hlog` payload: a zero run of Int64.min (negating it trapped) or past the index
    /// limit is refused with an error; a count of Int64.max is read.
    @Test func extremeRunsAndCountsAreRefusedNotTrapped() throws {
        func payload(_ values: [Int64]) -> [UInt8] {
            var body: [UInt8] = []
            for value in values { HistogramEncoding.appendZigZag(value, to: &body) }
            var bytes: [UInt8] = []
            HistogramEncoding.append(HistogramEncoding.encodingCookie, to: &bytes)
            HistogramEncoding.append(UInt32(body.count), to: &bytes)
            HistogramEncoding.append(UInt32(0), to: &bytes)
            HistogramEncoding.append(UInt32(3), to: &bytes)
            HistogramEncoding.append(UInt64(1), to: &bytes)
            HistogramEncoding.append(UInt64(1_000_000), to: &bytes)
            HistogramEncoding.append(UInt64(0), to: &bytes)
            return bytes + body
        }
        #expect(try HistogramEncoding.decodeCounts(payload([-3, 5])).counts.values.reduce(0, +) == 5)
        #expect(try HistogramEncoding.decodeCounts(payload([Int64.max])).counts.values.first == UInt64(Int64.max))
        for values: [Int64] in [[Int64.min], [-(1 << 40)], [5, Int64.min + 1]] {
            #expect(throws: HistogramEncoding.Error.self, "\(values)") { try HistogramEncoding.decodeCounts(payload(values)) }
        }
    }

    @Test func intervalLogHasTheStandardHeaderAndTaggedLines() throws {
        var log = HistogramLogWriter(startTime: Date(timeIntervalSince1970: 1_700_000_000.25))
        try log.append(tag: "corrected", start: 1, length: 1, histogram: sample())
        let lines = log.text.split(separator: "\n").map(String.init)
        #expect(lines.contains("#[Histogram log format version 1.3]"))
        #expect(lines.contains { $0.hasPrefix("#[StartTime: 1700000000.250 (seconds since epoch)") })
        #expect(lines.contains("\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\""))
        let entry = try #require(lines.last).split(separator: ",").map(String.init)
        #expect(entry.count == 5)
        #expect(entry[0] == "Tag=corrected" && entry[1] == "1.000" && entry[2] == "1.000")
        #expect(entry[3] == String(format: "%.3f", Double(sample().max) / 1000))
        let decoded = try HistogramEncoding.decodeCounts(
            try HistogramEncoding.decompress(Array(try #require(Data(base64Encoded: entry[4])))))
        #expect(decoded.counts.values.reduce(0, +) == 12)
    }
}
