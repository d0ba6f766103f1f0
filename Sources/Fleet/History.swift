import FleetProtocol
import Foundation
import Synchronization

/// One operation in a run's history, in the style of Jepsen: every operation is
/// first `invoke`d, then completes as `ok` (it happened), `fail` (it certainly did
/// not happen) or `info` (the outcome is unknown, e.g. a sync whose reply timed out).
///
/// Every process of a run (each node, the launcher) appends its events to its own
/// `history/<process>.jsonl`; the launcher merges them into `history.jsonl` by time.
/// The checker reads them beside the stores.
public struct HistoryEvent: Codable, Sendable, Hashable {
    public enum Kind: String, Codable, Sendable {
        case invoke, ok, fail, info
    }

    /// What was done. Device operations, then the launcher's faults ("nemesis").
    public enum Operation: String, Codable, Sendable, CaseIterable {
        // Device operations.
        case login, compose, sign, cancel, decline, sync, captive
        case online, offline, drain
        // Launcher operations (faults and their end).
        case start, stop, kill, restart, pause, resume, toxic, partition, heal, templateEdit = "template-edit"
        /// The coordinator's store copied (`snapshot`) and put back in place of the live one (`restore`).
        case snapshot, restore
    }

    /// Seconds since the Unix epoch (every process of a run shares this time base).
    public var time: Double
    /// The process that recorded it: `launcher`, `coordinator`, `node-<group>-<n>`.
    public var process: String
    public var type: Kind
    public var op: Operation
    /// The device the operation belongs to, if any.
    public var device: String?
    /// The device-local envelope id.
    public var envelope: String?
    /// The envelope's transaction id (unique per device, carried to the server).
    public var transaction: String?
    /// The device's outbox sequence number of the envelope.
    public var sequence: UInt64?
    /// The server's envelope id, once known.
    public var serverEnvelope: String?
    /// Why it failed or what is unknown.
    public var error: String?
    /// Anything else worth keeping (targets of a fault, a toxic's attributes, counts).
    public var details: [String: String]?

    public init(
        time: Double = WallClock.system.secondsSince1970, process: String, type: Kind, op: Operation, device: String? = nil,
        envelope: String? = nil, transaction: String? = nil, sequence: UInt64? = nil, serverEnvelope: String? = nil,
        error: String? = nil, details: [String: String]? = nil
    ) {
        self.time = time
        self.process = process
        self.type = type
        self.op = op
        self.device = device
        self.envelope = envelope
        self.transaction = transaction
        self.sequence = sequence
        self.serverEnvelope = serverEnvelope
        self.error = error
        self.details = details
    }
}

/// Appends history events to a JSON-lines file, one `write(2)` per event, so a
/// process killed with SIGKILL leaves at most one partial last line (which
/// ``HistoryReader`` reports and skips).
public final class HistoryWriter: Sendable {
    /// The open file, or nil once closed; one writer at a time.
    private let handle: Mutex<FileHandle?>

    /// Opens (creating if needed) `path` for appending.
    public init(path: String) throws {
        let url = URL(fileURLWithPath: path)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        if !FileManager.default.fileExists(atPath: path) {
            guard FileManager.default.createFile(atPath: path, contents: nil) else {
                throw HistoryError.cannotOpen(path: path)
            }
        }
        guard let handle = FileHandle(forWritingAtPath: path) else { throw HistoryError.cannotOpen(path: path) }
        handle.seekToEndOfFile()
        self.handle = Mutex(handle)
    }

    /// Appends one event. Errors are returned to the caller, never swallowed: a
    /// history with holes would make the checker's verdict meaningless.
    public func append(_ event: HistoryEvent) throws {
        guard var line = HistoryLine.encode(event) else { return try appendLine(event) }
        line.append(UInt8(ascii: "\n"))
        try write(line)
    }

    /// Appends any value as one JSON line (the hostile log, ``HostileAttempt``, shares the writer).
    public func appendLine(_ value: some Encodable) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        var line = try encoder.encode(value)
        line.append(UInt8(ascii: "\n"))
        try write(line)
    }

    private func write(_ line: some DataProtocol) throws {
        try handle.withLock { handle in
            guard let handle else { throw HistoryError.closed }
            try handle.write(contentsOf: line)
        }
    }

    public func close() {
        handle.withLock { handle in
            try? handle?.close()
            handle = nil
        }
    }

    deinit { close() }
}

public enum HistoryError: Error, Equatable, CustomStringConvertible {
    case cannotOpen(path: String)
    case closed
    case lineTooLong(path: String, line: Int, limit: Int)
    case invalidLine(path: String, line: Int, reason: String)
    case tooManyEvents(path: String, limit: Int)

    public var description: String {
        switch self {
        case .cannotOpen(let path): return "cannot open history file \(path)"
        case .closed: return "the history file is already closed"
        case .lineTooLong(let path, let line, let limit): return "\(path):\(line): line longer than \(limit) bytes"
        case .invalidLine(let path, let line, let reason): return "\(path):\(line): not a history event: \(reason)"
        case .tooManyEvents(let path, let limit): return "\(path): more than \(limit) events"
        }
    }
}

/// Reads a history file written by ``HistoryWriter``; bounded in line length and
/// event count. A truncated final line (a writer killed mid-write) is skipped and
/// reported in ``Contents/truncatedTail``; any other bad line is an error.
public enum HistoryReader {
    public struct Contents: Sendable {
        public var events: [HistoryEvent]
        /// True when the last line had no newline and did not parse.
        public var truncatedTail: Bool
    }

    public static let maxLineBytes = 64 * 1024
    public static let maxEvents = 20_000_000

    public static func read(path: String) throws -> Contents {
        guard let data = FileManager.default.contents(atPath: path) else { throw HistoryError.cannotOpen(path: path) }
        return try parse(data, path: path)
    }

    static func parse(_ data: Data, path: String) throws -> Contents {
        let (events, truncated) = try parseLines(data, path: path, as: HistoryEvent.self)
        return Contents(events: events, truncatedTail: truncated)
    }

    /// One JSON value of `Line` per line, bounded as a history is (the hostile log shares it); a
    /// truncated final line is skipped and reported.
    static func parseLines<Line: Decodable>(_ data: Data, path: String, as type: Line.Type) throws -> (lines: [Line], truncatedTail: Bool) {
        let decoder = JSONDecoder()
        var lines: [Line] = []
        var truncated = false
        var lineNumber = 0
        var start = data.startIndex
        while start < data.endIndex {
            lineNumber += 1
            let newline = data[start...].firstIndex(of: UInt8(ascii: "\n"))
            let end = newline ?? data.endIndex
            guard end - start <= maxLineBytes else {
                throw HistoryError.lineTooLong(path: path, line: lineNumber, limit: maxLineBytes)
            }
            let line = data[start..<end]
            if !line.isEmpty {
                do {
                    lines.append(try decoder.decode(Line.self, from: line))
                } catch {
                    if newline == nil {
                        truncated = true
                    } else {
                        throw HistoryError.invalidLine(path: path, line: lineNumber, reason: "\(error)")
                    }
                }
                guard lines.count <= maxEvents else { throw HistoryError.tooManyEvents(path: path, limit: maxEvents) }
            }
            start = newline.map { data.index(after: $0) } ?? data.endIndex
        }
        return (lines, truncated)
    }

    /// Reads every `*.jsonl` file in `directory` and returns their events merged by time
    /// (stable: events with equal times keep their file's order).
    public static func readMerged(directory: String) throws -> (events: [HistoryEvent], truncatedFiles: [String]) {
        let names = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".jsonl") }.sorted()
        var all: [(HistoryEvent, Int)] = []
        var truncated: [String] = []
        for name in names {
            let contents = try read(path: URL(fileURLWithPath: directory).appendingPathComponent(name).path)
            if contents.truncatedTail { truncated.append(name) }
            for event in contents.events { all.append((event, all.count)) }
        }
        all.sort { $0.0.time != $1.0.time ? $0.0.time < $1.0.time : $0.1 < $1.1 }
        return (all.map(\.0), truncated)
    }
}
