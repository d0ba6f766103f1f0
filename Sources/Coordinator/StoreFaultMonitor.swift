import FleetProtocol
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import GRDB
import Logging
import Metrics
import Synchronization

/// A store write that failed because of the disk under the store, not because of the request.
public enum StoreFaultKind: String, Sendable, Hashable, Codable, CaseIterable {
    /// `SQLITE_FULL`: no space left (or a quota).
    case diskFull = "disk_full"
    /// `SQLITE_IOERR` and its extended codes, or `SQLITE_CANTOPEN` while running (a journal or
    /// temporary file could not be created: no space, no inodes or no descriptors left).
    case ioError = "io_error"
    /// The store's server cannot be reached (PostgreSQL down, restarting or refusing connections);
    /// never SQLite, which is a file.
    case unreachable = "unreachable"

    /// The kind of `error`, or `nil` when it is not a disk failure (a constraint, a bug, a busy store…).
    public static func of(_ error: any Error) -> StoreFaultKind? {
        if let fault = error as? StoreDiskFault { return fault.kind }
        guard let error = error as? DatabaseError else { return nil }
        switch error.resultCode {
        case .SQLITE_FULL: return .diskFull
        case .SQLITE_IOERR, .SQLITE_CANTOPEN: return .ioError
        default: return nil
        }
    }

    /// How the log line that ends an episode names it.
    var episodeName: String {
        switch self {
        case .diskFull: "disk-full"
        case .ioError: "I/O-error"
        case .unreachable: "unreachable-server"
        }
    }

    /// The name in `GET /health`'s `reasons`.
    public var healthReason: String { "store_\(rawValue)" }

    /// What a device or an admin client is told: `unavailable`, retryable, and about the storage,
    /// not an `internal` error (a disk does not fill up in milliseconds, hence the wait).
    public var refusal: FleetError {
        let what =
            switch self {
            case .diskFull: "its disk is full"
            case .ioError: "its disk fails I/O"
            case .unreachable: "its database server cannot be reached"
            }
        return FleetError(
            .unavailable, "the server's storage is failing (\(what)); retry later (resending is safe: a push is applied at most once)",
            retryable: true, retryAfterMs: 5_000)
    }
}

/// A disk fault of a store other than SQLite (PostgreSQL's SQLSTATE classes 53 and 58), thrown
/// in place of the driver's error so that ``StoreFaultKind/of(_:)`` knows it.
package struct StoreDiskFault: Error, CustomStringConvertible {
    package var kind: StoreFaultKind
    /// The server's message and code, without the statement.
    package var message: String

    package init(kind: StoreFaultKind, message: String) {
        self.kind = kind
        self.message = message
    }

    package var description: String { message }
}

/// One disk-fault episode of the store: from the first failed write to the next write that succeeds.
public struct StoreFaultEpisode: Sendable, Hashable, Codable {
    /// The kind of the write failure that started the episode.
    public var kind: StoreFaultKind
    /// ISO 8601 on the HTTP API, as every time there (``CoordinatorHTTPServer``'s encoder).
    public var since: Date
    /// Writes that failed with a disk fault during the episode.
    public var failedWrites: Int
    /// SQLite's message of the latest failure, with its extended result code.
    public var lastError: String

    public init(kind: StoreFaultKind, since: Date, failedWrites: Int, lastError: String) {
        self.kind = kind
        self.since = since
        self.failedWrites = failedWrites
        self.lastError = lastError
    }
}

/// Watches the coordinator store's writes for disk faults (disk full, I/O errors) and turns
/// them into one episode: one error line when it starts, one line when a write succeeds again,
/// a counter for every failed write, and what `GET /health` and `GET /status` report meanwhile.
/// The episode ends by itself on the next write that changes the store; no restart is needed.
public final class StoreFaultMonitor: Sendable {
    /// Label of the failed-writes counter (dimension `reason`: `disk_full` or `io_error`).
    public static let failuresLabel = "signfleet_store_write_failures_total"

    /// The store file, for the log lines.
    public let path: String
    /// Whether `path` is a file whose disk `probeDisk(bytes:)` can test (a SQLite store; not a
    /// PostgreSQL location).
    public let probesDisk: Bool
    private let logger: Logger
    private let now: @Sendable () -> Date
    private let counters: [StoreFaultKind: Counter]
    private let state = Mutex<StoreFaultEpisode?>(nil)
    /// Mirrors `state != nil`, so the success path of every write costs one atomic load.
    private let faulted = Atomic<Bool>(false)
    /// When ``probeDuringEpisode()`` last wrote its probe: at most one a second, whatever asks.
    private let lastEpisodeProbe = Mutex<Date?>(nil)

    public init(
        path: String, probesDisk: Bool = false, logger: Logger = Logger(label: "signfleet.coordinator.store"),
        metricsFactory: any MetricsFactory = MetricsSystem.factory, now: @escaping @Sendable () -> Date = WallClock.system.now
    ) {
        self.path = path
        self.probesDisk = probesDisk
        self.logger = logger
        self.now = now
        var counters: [StoreFaultKind: Counter] = [:]
        for kind in StoreFaultKind.allCases {
            counters[kind] = Counter(label: Self.failuresLabel, dimensions: [("reason", kind.rawValue)], factory: metricsFactory)
        }
        self.counters = counters
    }

    /// The episode going on now, if any.
    public var episode: StoreFaultEpisode? { state.withLock { $0 } }

    /// `GET /health`'s reasons: empty while the store writes fine.
    public var healthReasons: [String] { episode.map { [$0.kind.healthReason] } ?? [] }

    /// Counts a failed write; the first one of an episode is logged, with what to do.
    public func recordFailure(_ kind: StoreFaultKind, error: any Error) {
        counters[kind]?.increment()
        let message = Self.describe(error)
        let started: Bool = state.withLock { episode in
            if var ongoing = episode {
                ongoing.failedWrites += 1
                ongoing.lastError = message
                episode = ongoing
                return false
            }
            episode = StoreFaultEpisode(kind: kind, since: now(), failedWrites: 1, lastError: message)
            faulted.store(true, ordering: .releasing)
            return true
        }
        guard started else { return }
        // Logged outside the lock: a slow log handler must not hold up every writer.
        switch kind {
        case .diskFull:
            logger.error(
                "the store's disk is full (SQLITE_FULL) writing \(path): free space; sync pushes are refused as retryable until a write succeeds",
                metadata: ["error": "\(message)"])
        case .ioError:
            logger.error(
                "the store's disk failed a write (\(message)) writing \(path): check the disk and the kernel log; sync pushes are refused as retryable until a write succeeds")
        case .unreachable:
            logger.error(
                "the store's database server cannot be reached (\(message)) at \(path): check that PostgreSQL runs and accepts connections; sync pushes are refused as retryable until a write succeeds")
        }
    }

    /// A write changed the store: ends the episode, if there is one, with a line saying how long it lasted.
    public func recordSuccess() {
        guard faulted.load(ordering: .acquiring) else { return }
        let ended: StoreFaultEpisode? = state.withLock { episode in
            defer { episode = nil }
            faulted.store(false, ordering: .releasing)
            return episode
        }
        guard let ended else { return }
        let seconds = max(0, now().timeIntervalSince(ended.since))
        logger.notice(
            "the store writes again (\(path)): the \(ended.kind.episodeName) episode lasted \(String(format: "%.1f", seconds)) s and \(ended.failedWrites) writes failed")
    }

    /// Runs a write transaction's outcome through the monitor: a disk fault is recorded (and
    /// rethrown); success is recorded only when `changed`, because a transaction that wrote
    /// nothing commits without touching the disk and proves nothing about it.
    package func observe<T>(changed: (T) -> Bool, _ write: () async throws -> T) async throws -> T {
        let value: T
        do {
            value = try await write()
        } catch {
            if let kind = StoreFaultKind.of(error) { recordFailure(kind, error: error) }
            throw error
        }
        if changed(value) { recordSuccess() }
        return value
    }

    /// Whether the disk under a store file takes a new write now: writes `bytes` to a file beside
    /// it (`<path>.probe`), syncs and removes it. A failure starts an episode (`ENOSPC`, `EDQUOT`:
    /// disk full; other errors: I/O error) and a success ends one. The coordinator probes at start
    /// (a restart on a still-full disk is degraded at once, not at its first failed write) and at
    /// each `GET /health` while an episode lasts (an idle coordinator learns that space came back).
    /// Returns the fault found, if any. With `recordingFailure` false (a probe during an episode)
    /// a failure changes nothing: only the store's own writes count as failed writes then.
    @discardableResult
    public func probeDisk(bytes: Int = 262_144, recordingFailure: Bool = true) -> StoreFaultKind? {
        let probe = path + ".probe"
        let probeFailed = { (code: Int32, what: String) -> StoreFaultKind in
            let kind: StoreFaultKind = code == ENOSPC || code == EDQUOT ? .diskFull : .ioError
            if recordingFailure {
                self.recordFailure(kind, error: StoreDiskFault(kind: kind, message: "\(what): \(String(cString: strerror(code))) (errno \(code))"))
            }
            return kind
        }
        let descriptor = open(probe, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return probeFailed(errno, "creating \(probe)") }
        defer {
            close(descriptor)
            unlink(probe)
        }
        let block = [UInt8](repeating: 0, count: max(1, bytes))
        let written = block.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        guard written == block.count else { return probeFailed(written < 0 ? errno : ENOSPC, "writing \(probe)") }
        guard fsync(descriptor) == 0 else { return probeFailed(errno, "syncing \(probe)") }
        recordSuccess()
        return nil
    }

    /// What `GET /health` runs while an episode lasts: an idle coordinator has no write to end it,
    /// so a probe looks whether space came back. At most one probe a second (a flood of health
    /// checks must not become a flood of 256 KB writes); a failure changes nothing.
    public func probeDuringEpisode() {
        guard probesDisk, episode != nil else { return }
        let at = now()
        let due = lastEpisodeProbe.withLock { last -> Bool in
            if let last, at.timeIntervalSince(last) < 1 { return false }
            last = at
            return true
        }
        if due { probeDisk(recordingFailure: false) }
    }

    /// SQLite's message and result code, without the statement (which may carry data).
    static func describe(_ error: any Error) -> String {
        if let fault = error as? StoreDiskFault { return fault.message }
        guard let error = error as? DatabaseError else { return "\(error)" }
        let code = error.extendedResultCode.rawValue
        let name = error.resultCode == .SQLITE_FULL ? "SQLITE_FULL" : error.resultCode == .SQLITE_CANTOPEN ? "SQLITE_CANTOPEN" : "SQLITE_IOERR"
        return "\(name), extended code \(code): \(error.message ?? "no message")"
    }
}

extension CoordinatorStore {
    /// A write, in the next group-committed transaction (``StoreWriteBatcher``), reported to
    /// ``faults``: every service writes through here, so a disk fault anywhere starts (and any
    /// later write that changes the store ends) the same episode.
    func write<T: Sendable>(_ updates: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await writes.write(updates)
    }
}
