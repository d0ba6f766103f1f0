import Foundation
import Histogram

/// Writes HdrHistogram's interval-log text format (`.hlog`, log format version 1.3), which
/// HdrHistogram's HistogramLogReader, HistogramLogAnalyzer and hdr-plot read: a header, then one
/// line per interval and tag: `Tag=NAME,start,length,max,base64(compressed V2 histogram)`.
/// Times are seconds from the run's start; values are microseconds, `max` is in milliseconds.
public struct HistogramLogWriter: Sendable {
    public private(set) var text: String

    /// Starts a log whose intervals are relative to `startTime`.
    public init(startTime: Date, comment: String? = nil) {
        let start = startTime.timeIntervalSince1970
        var text = ""
        if let comment { text += "#[\(comment)]\n" }
        text += "#[Histogram log format version 1.3]\n"
        text += "#[StartTime: \(String(format: "%.3f", start)) (seconds since epoch), \(ISO8601DateFormatter().string(from: startTime))]\n"
        text += "#[BaseTime: \(String(format: "%.3f", start)) (seconds since epoch)]\n"
        text += "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n"
        self.text = text
    }

    /// Appends one interval's histogram under `tag`.
    public mutating func append(tag: String?, start: Double, length: Double, histogram: Histogram<UInt64>) throws(HistogramEncoding.Error) {
        append(tag: tag, start: start, length: length, line: try EncodedInterval(histogram))
    }

    /// Appends an interval encoded earlier (the recorder encodes each interval as it closes).
    public mutating func append(tag: String?, start: Double, length: Double, line: EncodedInterval) {
        let prefix = tag.map { "Tag=\($0)," } ?? ""
        text += prefix + String(format: "%.3f,%.3f,%.3f,", start, length, line.maxMilliseconds) + line.base64 + "\n"
    }
}

/// One interval's histogram, compressed and base64-encoded as an interval log carries it.
public struct EncodedInterval: Sendable, Hashable, Codable {
    public var maxMilliseconds: Double
    public var base64: String

    public init(_ histogram: Histogram<UInt64>) throws(HistogramEncoding.Error) {
        maxMilliseconds = histogram.totalCount == 0 ? 0 : Double(histogram.max) / 1000
        base64 = Data(try HistogramEncoding.encodeCompressed(histogram)).base64EncodedString()
    }
}
