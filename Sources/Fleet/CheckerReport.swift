import FleetProtocol
import Foundation

/// The checker's verdict on a run (docs/checker.md, "Verdict").
///
/// Encoded (check.json, summary.json) and printed as its raw value: `valid`, `invalid`, `unknown`.
public enum CheckVerdict: String, Codable, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// Every envelope signed on a device is on the server once, in order, verified, routed correctly.
    case valid
    /// At least one anomaly proves something went wrong.
    case invalid
    /// Nothing went provably wrong, but something could not be decided (an outbox never drained,
    /// an unreadable or missing store).
    case unknown

    /// The raw value: `valid`, `invalid` or `unknown`.
    public var description: String { rawValue }

    /// The process exit code: 0 valid, 1 invalid, 2 unknown.
    public var exitCode: Int32 {
        switch self {
        case .valid: 0
        case .invalid: 1
        case .unknown: 2
        }
    }
}

/// One thing the checker found wrong (or could not decide), with the evidence that shows it.
public struct CheckAnomaly: Codable, Sendable, Hashable {
    public enum Kind: String, Codable, Sendable, Hashable, CaseIterable {
        /// Signed on a device and delivered (acknowledged, or `ok sync` in the history), never on the server.
        case lost
        /// Still in a device's outbox, unacknowledged, and not on the server: the run ended before it synced.
        case unsynced
        /// The same (device, transaction) or (device, sequence) more than once on the server.
        case duplicate
        /// The server took a device's items out of its sequence order, skipped a sequence, or holds a
        /// transaction at another sequence than the device gave it.
        case orderViolation = "order-violation"
        /// A server envelope whose device signature, claims or bindings do not verify with the device's
        /// enrolled key, or whose payload is not the one the device signed.
        case invalidSignature = "invalid-signature"
        /// Recipients on the server acted out of routing order.
        case routingViolation = "routing-violation"
        /// A receipt (device outbox, history `ok sync`, or the server's own sync result) names a server
        /// envelope that does not exist.
        case receiptWithoutServerRecord = "receipt-without-server-record"
        /// A device reported something done (`ok sign`), or the server holds its item, but the device's
        /// store has no trace of it.
        case deviceDataLoss = "device-data-loss"
        /// A hostile group's attempt got what the coordinator must refuse an attacker (its log,
        /// `hostile/<process>.jsonl`, records the answer).
        case hostileBreach = "hostile-breach"
        /// A backend group's log (`backend/<process>.jsonl`) records an answer of the REST API — an
        /// envelope created, signed, declined — that the server's records contradict.
        case backendMismatch = "backend-mismatch"
        /// An input could not be read or is missing (a device store, the coordinator store, a history file).
        case unreadableInput = "unreadable-input"

        /// The verdict this kind forces: ``CheckVerdict/invalid`` for proofs, ``CheckVerdict/unknown`` otherwise.
        public var verdict: CheckVerdict {
            switch self {
            case .unsynced, .unreadableInput: .unknown
            default: .invalid
            }
        }
    }

    public var kind: Kind
    public var device: String?
    public var transaction: String?
    public var sequence: UInt64?
    /// The server envelope id concerned, when there is one.
    public var serverEnvelope: String?
    public var message: String
    public var witness: CheckWitness

    public init(
        kind: Kind, device: String? = nil, transaction: String? = nil, sequence: UInt64? = nil, serverEnvelope: String? = nil,
        message: String, witness: CheckWitness = CheckWitness()
    ) {
        self.kind = kind
        self.device = device
        self.transaction = transaction
        self.sequence = sequence
        self.serverEnvelope = serverEnvelope
        self.message = message
        self.witness = witness
    }
}

/// The few history events and store rows that show an anomaly, and nothing else.
public struct CheckWitness: Codable, Sendable, Hashable {
    public var events: [HistoryEvent]
    public var rows: [WitnessRow]

    public init(events: [HistoryEvent] = [], rows: [WitnessRow] = []) {
        self.events = events
        self.rows = rows
    }
}

/// One store row in a witness, e.g. `coordinator.sqlite envelope {id, deviceID, sequence, …}`.
public struct WitnessRow: Codable, Sendable, Hashable {
    /// The file, relative to the run directory (`coordinator.sqlite`, `devices/a-1.sqlite`).
    public var store: String
    public var table: String
    /// The row's relevant columns, as text; `(none)` rows say what is absent.
    public var fields: [String: String]

    public init(store: String, table: String, fields: [String: String]) {
        self.store = store
        self.table = table
        self.fields = fields
    }
}

/// What the checker counted, in total and per device.
public struct CheckCounts: Codable, Sendable, Hashable {
    public struct Device: Codable, Sendable, Hashable {
        /// Outbox items (signed or declined, queued for sync), whatever their state.
        public var signed = 0
        /// Outbox items with an applied or duplicate receipt.
        public var acknowledged = 0
        /// Outbox items still waiting for an acknowledgement.
        public var pending = 0
        /// Outbox items the server rejected.
        public var rejected = 0
        /// Envelopes of this device on the server.
        public var onServer = 0
        /// History `ok sign` / `ok decline` events.
        public var historySigned = 0
        /// History `ok sync` events.
        public var historySynced = 0
        /// Transactions dropped by a forced logout before they were ever pushed (the device's journal says so).
        public var droppedByLogout = 0
        /// Envelopes signed after the copy this device's store was restored from (a `restore_node`
        /// fault) and gone with it: the history has `ok sign`, the store (and the server, for those
        /// never synced) has none. The fault's doing, not an anomaly.
        public var lostWithRestoredStore = 0

        public init() {}
    }

    public var devices = 0
    public var signed = 0
    public var acknowledged = 0
    public var pending = 0
    public var rejected = 0
    public var serverEnvelopes = 0
    public var serverRecipients = 0
    public var historyEvents = 0
    /// The sum of ``Device/lostWithRestoredStore``.
    public var lostWithRestoredStores = 0
    public var perDevice: [String: Device] = [:]

    public init() {}
}

/// An `info` event (outcome unknown when it happened), resolved against the stores afterwards.
public struct ResolvedInfo: Codable, Sendable, Hashable {
    public var event: HistoryEvent
    /// `happened`, `did-not-happen` or `undecided`.
    public var resolution: String
    public var reason: String
}

/// The checker's result: verdict, anomalies with witnesses, counts and notes. Written to `check.json`.
public struct CheckReport: Codable, Sendable, Hashable {
    public var verdict: CheckVerdict
    public var anomalies: [CheckAnomaly]
    public var counts: CheckCounts
    public var resolvedInfo: [ResolvedInfo]
    /// Things worth knowing that are not anomalies (truncated history files, operations without completion…).
    public var notes: [String]
    /// The run directory checked, if any.
    public var run: String?
    /// When the check ran (seconds since the Unix epoch).
    public var checkedAt: Double

    public init(
        anomalies: [CheckAnomaly], counts: CheckCounts, resolvedInfo: [ResolvedInfo] = [], notes: [String] = [], run: String? = nil,
        checkedAt: Double = WallClock.system.secondsSince1970
    ) {
        self.anomalies = anomalies
        self.counts = counts
        self.resolvedInfo = resolvedInfo
        self.notes = notes
        self.run = run
        self.checkedAt = checkedAt
        verdict = Self.verdict(for: anomalies)
    }

    /// Invalid when any anomaly proves a fault, else unknown when any could not be decided, else valid.
    public static func verdict(for anomalies: [CheckAnomaly]) -> CheckVerdict {
        if anomalies.contains(where: { $0.kind.verdict == .invalid }) { return .invalid }
        if anomalies.contains(where: { $0.kind.verdict == .unknown }) { return .unknown }
        return .valid
    }

    /// Anomalies of one kind.
    public func anomalies(_ kind: CheckAnomaly.Kind) -> [CheckAnomaly] {
        anomalies.filter { $0.kind == kind }
    }

    /// Writes the report as pretty JSON (sorted keys) to `path`, atomically.
    public func write(to path: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        try encoder.encode(self).write(to: URL(fileURLWithPath: path), options: .atomic)
    }

    /// Reads a report written by ``write(to:)``.
    public static func read(from path: String) throws -> CheckReport {
        guard let data = FileManager.default.contents(atPath: path) else { throw CheckerError.unreadable(path: path, reason: "cannot read the file") }
        return try JSONDecoder().decode(CheckReport.self, from: data)
    }
}

/// Why a check could not start.
public enum CheckerError: Error, Equatable, CustomStringConvertible {
    /// The directory is not a run directory (no coordinator store, or not a directory at all).
    case notARunDirectory(path: String, reason: String)
    case unreadable(path: String, reason: String)

    public var description: String {
        switch self {
        case .notARunDirectory(let path, let reason): "\(path) is not a run directory: \(reason)"
        case .unreadable(let path, let reason): "cannot read \(path): \(reason)"
        }
    }
}
