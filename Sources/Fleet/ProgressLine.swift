import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The launcher's live progress line on standard error. On a terminal it is
/// rewritten in place (`\r`, erase to end of line) at every sample; otherwise (a
/// log file, CI) one line is printed every `interval` seconds so logs stay readable.
public struct ProgressLine: Sendable {
    public let isTerminal: Bool
    public let interval: Double
    private var lastPrinted: Double = -.infinity
    private var previous: TimelineSample?
    private var shownInPlace = false

    public init(isTerminal: Bool = isatty(STDERR_FILENO) == 1, interval: Double = 5) {
        self.isTerminal = isTerminal
        self.interval = interval
    }

    /// The text of the line for `sample`, with rates since the previous sample.
    public static func render(_ sample: TimelineSample, previous: TimelineSample?, phase: String, duration: Double) -> String {
        var rates = ""
        if let previous, sample.time > previous.time {
            let span = sample.time - previous.time
            let signed = Double(sample.signed - previous.signed) / span
            let synced = Double(sample.synced - previous.synced) / span
            rates = String(format: " | %.1f signed/s %.1f synced/s", signed, synced)
        }
        var latency = ""
        if let p99 = sample.syncAckP99 { latency = String(format: " | ack p99 %.0fms", p99 * 1000) }
        let faults = sample.activeFaults.isEmpty ? "none" : sample.activeFaults.joined(separator: ", ")
        return String(format: "[%@ %3.0fs/%.0fs] ", phase, sample.time, duration)
            + "devices \(sample.online) online \(sample.offline) offline"
            + " | composed \(sample.composed) signed \(sample.signed) synced \(sample.synced) pending \(sample.pending)"
            + rates + latency + " | faults: \(faults)"
    }

    /// Writes the line for `sample` if it is time to.
    public mutating func show(_ sample: TimelineSample, phase: String, duration: Double) {
        if isTerminal {
            let text = Self.render(sample, previous: previous, phase: phase, duration: duration)
            previous = sample
            FileHandle.standardError.write(Data(("\r" + text + "\u{1B}[K").utf8))
            shownInPlace = true
        } else if sample.time - lastPrinted >= interval {
            // Rates since the previous printed line, so they cover the whole interval.
            let text = Self.render(sample, previous: previous, phase: phase, duration: duration)
            previous = sample
            lastPrinted = sample.time
            FileHandle.standardError.write(Data((text + "\n").utf8))
        }
    }

    /// Prints a message on its own line (ending an in-place progress line first).
    public mutating func message(_ text: String) {
        if shownInPlace {
            FileHandle.standardError.write(Data("\n".utf8))
            shownInPlace = false
        }
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }

    /// Ends an in-place line so what follows starts on a new line.
    public mutating func finish() {
        if shownInPlace {
            FileHandle.standardError.write(Data("\n".utf8))
            shownInPlace = false
        }
    }
}
