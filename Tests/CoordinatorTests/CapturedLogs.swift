import Logging
import Synchronization

/// Log lines kept in memory, for tests that assert what (and how much) was logged.
final class CapturedLogs: Sendable {
    struct Line: Sendable, CustomStringConvertible {
        var level: Logger.Level
        var message: String
        var description: String { "[\(level)] \(message)" }
    }

    private let lines = Mutex<[Line]>([])

    /// A logger at `level` that writes here.
    func logger(label: String = "captured", level: Logger.Level = .trace) -> Logger {
        var logger = Logger(label: label) { _ in Handler(sink: self) }
        logger.logLevel = level
        return logger
    }

    var all: [Line] { lines.withLock { $0 } }

    /// The lines whose message contains `text`.
    func matching(_ text: String) -> [Line] { all.filter { $0.message.contains(text) } }

    fileprivate func append(_ line: Line) { lines.withLock { $0.append(line) } }

    private struct Handler: LogHandler {
        let sink: CapturedLogs
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        func log(event: LogEvent) {
            sink.append(Line(level: event.level, message: event.message.description))
        }

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
    }
}
