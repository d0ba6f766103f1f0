import FleetProtocol
import Logging
import Synchronization

/// Refused HTTP input, logged through the ZeroMQ server's `RefusalLog`: the first refusal of
/// each kind at once, later ones as one summary line with their count, so 10,000 bad requests
/// cost a few lines (issue #14 part 10) and an operator still learns that they happen.
public final class HTTPRefusals: Sendable {
    /// What was refused. Fixed texts: request data never becomes a kind (the table stays small).
    enum Kind: String {
        case adminToken = "HTTP admin request refused: no or wrong bearer token"
        case adminBody = "HTTP admin request refused: the body is not the expected JSON or has invalid values"
        case signingForm = "HTTP signing form refused: not readable URL-encoded data"
        case signingLink = "HTTP signing request refused: unknown or malformed signing link (or document)"
        case signingSession = "HTTP signing request refused: not the session's browser (cookie or CSRF token missing or wrong)"
        case overConnectionLimit = "HTTP request refused with 503: more connections open than the limit (--http-max-connections)"
    }

    private let log: Mutex<RefusalLog>
    private let logger: Logger
    private let now: @Sendable () -> ContinuousClock.Instant

    /// - Parameters:
    ///   - logger: where the refusals are logged.
    ///   - interval: at most one summary line per kind in this time.
    ///   - now: the clock (tests move their own).
    public init(
        logger: Logger, interval: Duration = .seconds(10), now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }
    ) {
        self.logger = logger
        self.now = now
        log = Mutex(RefusalLog(interval: interval, now: now()))
    }

    func note(_ kind: Kind) {
        let at = now()
        log.withLock { $0.note(kind.rawValue, logger: logger, now: at) }
    }
}
