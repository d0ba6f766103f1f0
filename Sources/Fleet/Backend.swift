import Foundation

// Backend groups (docs/scenarios.md, "`backend`"): integrations that drive the coordinator's
// eSignature REST API beside the devices — each creates envelopes for an embedded signer, opens
// the signing page and signs it (or declines), and fetches the completed document — and record
// what they did. This file is the model shared by the scenario, the launcher, the node process
// that runs the backends and the checker.

/// A backend group's settings in a scenario.
public struct BackendSettings: Codable, Sendable, Hashable {
    /// Poisson arrivals of new envelopes per backend.
    public var envelopesPerMinute: Double
    /// Probability the signer declines instead of signing.
    public var declineRate: Double
    /// Probability the backend voids the envelope once created, instead of having it signed.
    /// With `declineRate`, at most 1: one draw per ceremony picks void, decline or sign.
    public var voidRate: Double

    public init(envelopesPerMinute: Double = 6, declineRate: Double = 0, voidRate: Double = 0) {
        self.envelopesPerMinute = envelopesPerMinute
        self.declineRate = declineRate
        self.voidRate = voidRate
    }

    /// A plan written before `voidRate` existed reads as voiding nothing.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        envelopesPerMinute = try container.decode(Double.self, forKey: .envelopesPerMinute)
        declineRate = try container.decode(Double.self, forKey: .declineRate)
        voidRate = try container.decodeIfPresent(Double.self, forKey: .voidRate) ?? 0
    }

    /// What one ceremony does, from one uniform draw `u` in [0, 1): void below `voidRate`, decline
    /// below `voidRate + declineRate`, sign otherwise (so with no voids, the same draws decline
    /// as before voids existed).
    public func outcome(draw u: Double) -> BackendEvent.Step {
        if u < voidRate { return .void }
        return u < voidRate + declineRate ? .decline : .sign
    }
}

/// What a backend group's node process needs beyond ``NodePlan``'s common fields (its `devices`
/// are the backends; `email`/`secret` the account's user they act as).
public struct BackendPlan: Codable, Sendable, Hashable {
    /// The coordinator's HTTP base URL (`http://host:port`); the REST API is under `/restapi`.
    public var baseURL: String
    /// `backend/<process>.jsonl`: one ``BackendEvent`` per line.
    public var logFile: String
    public var settings: BackendSettings

    public init(baseURL: String, logFile: String, settings: BackendSettings) {
        self.baseURL = baseURL
        self.logFile = logFile
        self.settings = settings
    }
}

/// One line of `backend/<process>.jsonl`: a step of one backend's ceremony and how it ended.
public struct BackendEvent: Codable, Sendable, Hashable {
    public enum Step: String, Codable, Sendable, CaseIterable {
        /// `POST …/envelopes` answered 201 (`envelope` is the id it named) or failed.
        case create
        /// The signer signed in the page: `303` with `event=signing_complete`.
        case sign
        /// The signer declined in the page: `303` with `event=decline`.
        case decline
        /// The backend voided the envelope it created: `PUT …/envelopes/{id}` `{"status": "voided"}` answered `200`.
        case void
        /// `GET …/documents/combined` answered a PDF.
        case combined
        /// The backend logged in (`auth.token` on the wire) for the token its REST calls carry.
        case login
    }

    /// Seconds since the Unix epoch.
    public var time: Double
    /// The backend's id (`<group>-<n>`).
    public var backend: String
    public var step: Step
    /// The server envelope id (absent for a create that failed, and for login).
    public var envelope: String?
    /// `ok`, or what went wrong (an HTTP status and DocuSign's errorCode, a timeout).
    public var result: String
    public var detail: String?

    public init(time: Double, backend: String, step: Step, envelope: String?, result: String, detail: String? = nil) {
        self.time = time
        self.backend = backend
        self.step = step
        self.envelope = envelope
        self.result = result
        self.detail = detail
    }

    public var ok: Bool { result == "ok" }
}

/// Reads `backend/<process>.jsonl` files (bounded as histories are, ``HistoryReader``).
public enum BackendLog {
    /// Every event in the `*.jsonl` files of `directory` (none when it does not exist), by time,
    /// and the files whose partial last line (a writer killed mid-write) was skipped.
    public static func read(directory: String) throws -> (events: [BackendEvent], truncatedFiles: [String]) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return ([], []) }
        var events: [BackendEvent] = []
        var truncated: [String] = []
        for name in names.sorted() where name.hasSuffix(".jsonl") {
            let path = URL(fileURLWithPath: directory).appendingPathComponent(name).path
            guard let data = FileManager.default.contents(atPath: path) else { throw HistoryError.cannotOpen(path: path) }
            let contents = try HistoryReader.parseLines(data, path: path, as: BackendEvent.self)
            events += contents.lines
            if contents.truncatedTail { truncated.append(name) }
        }
        return (events.sorted { $0.time < $1.time }, truncated)
    }
}
